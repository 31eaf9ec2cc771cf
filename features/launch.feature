Feature: Launch
  A node Karpenter launches must join this cluster: its user data is what its AMI family's
  bootstrap accepts and names this cluster's endpoint, CA and service CIDR, its launch template
  carries what the EC2NodeClass says (and the safe defaults where it says nothing), and
  capacity Karpenter does not own — the managed node group every world has — is never touched.

  Scenario: nodes launched with a wrong API endpoint never join and are replaced
    Given the NodePool "default" from "seed-000-default.yaml"
    And the controller is configured with the API endpoint "https://wrong.gr7.us-west-2.eks.amazonaws.com"
    When the Deployment "web" with 2 replicas requesting 1 CPU is created
    Then for 30 minutes no Karpenter node joins and no instance runs unregistered for more than 20 minutes
    And every instance launched says its bootstrap names another cluster
    And more than 1 instance was launched

  Scenario: the managed node group's instances survive everything Karpenter does
    Given the NodePool "default" from "seed-000-default.yaml"
    When the Deployment "web" with 4 replicas requesting 1 CPU is created
    Then within 3 minutes all pods of "web" are Running
    When the Deployment "web" is scaled to 0 replicas
    And 10 minutes pass
    Then the node group's 2 instances run with the tags EKS gave them
    And no NodeClaim names a node group instance
    And the system pods run on the node group

  Scenario: a node that is still NotReady causes no extra NodeClaim
    Given the NodePool "default" from "seed-000-default.yaml"
    And nodes stay NotReady for 3 minutes after registering
    When the Deployment "web" with 2 replicas requesting 1 CPU is created
    Then within 6 minutes all pods of "web" are Running
    And exactly 1 node was launched

  Scenario: the user's user data is merged before Karpenter's bootstrap
    Given the manifests:
      """
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: default}
      spec:
        template:
          spec:
            requirements:
              - {key: kubernetes.io/arch, operator: In, values: [amd64]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      ---
      apiVersion: karpenter.k8s.aws/v1
      kind: EC2NodeClass
      metadata: {name: default}
      spec:
        role: KarpenterNodeRole-sim
        amiSelectorTerms: [{alias: al2023@latest}]
        subnetSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
        securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
        kubelet: {maxPods: 42}
        userData: |
          #!/bin/bash
          echo "tuned by the platform team" > /etc/motd
      """
    When the Deployment "web" with 2 replicas requesting 1 CPU is created
    Then within 3 minutes all pods of "web" are Running
    And every launch template's user data has "tuned by the platform team" before "kind: NodeConfig"
    And every launch template's user data has "maxPods: 42"

  Scenario: launch templates require IMDSv2 with a hop limit of 1 unless the class says otherwise
    Given the NodePool "default" from "seed-000-default.yaml"
    When the Deployment "web" with 2 replicas requesting 1 CPU is created
    Then within 3 minutes all pods of "web" are Running
    And every launch template's metadata options have "httpTokens" = "required"
    And every launch template's metadata options have "httpPutResponseHopLimit" = "1"
    And every launch template has a root volume "/dev/xvda" of "20Gi"

  Scenario: equal launches share one launch template, named by its content
    Given the NodePool "one-size":
      """
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: one-size}
      spec:
        template:
          spec:
            requirements:
              - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.xlarge]}
              - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      """
    And the EC2NodeClass "default" from "seed-000-default.yaml"
    When the Deployment "web" with 6 replicas requesting 3 CPU is created
    Then within 4 minutes all pods of "web" are Running
    And there are fewer launch templates than nodes
    And every launch template is named by its content

  Scenario: a NodePool label the kubelet may not set is synced after registration
    Given the NodePool "restricted":
      """
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: restricted}
      spec:
        template:
          metadata:
            labels: {node-restriction.kubernetes.io/team: payments}
          spec:
            requirements:
              - {key: kubernetes.io/arch, operator: In, values: [amd64]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      """
    And the EC2NodeClass "default" from "seed-000-default.yaml"
    When the Deployment "web" with 2 replicas requesting 1 CPU is created
    Then within 3 minutes all pods of "web" are Running
    And every launch template's user data lacks "node-restriction.kubernetes.io/team"
    And every node has label "node-restriction.kubernetes.io/team" = "payments"

  Scenario: instances carry upstream's tags, and the claim's name
    Given the NodePool "default" from "seed-000-default.yaml"
    When the Deployment "web" with 2 replicas requesting 1 CPU is created
    Then within 3 minutes all pods of "web" are Running
    And every Karpenter instance is tagged "eks:eks-cluster-name" = "sim"
    And every Karpenter instance is tagged "kubernetes.io/cluster/sim" = "owned"
    And every Karpenter instance is tagged "karpenter.k8s.aws/ec2nodeclass" = "default"
    And every Karpenter instance names its NodeClaim in "karpenter.sh/nodeclaim"

  Scenario: Bottlerocket nodes join with the taints and labels of their NodePool in TOML
    Given the manifests from "seed-002-bottlerocket-and-taints.yaml"
    When the Deployment "myapp" from "seed-002-bottlerocket-and-taints.yaml" is created
    Then within 3 minutes all pods of "myapp" are Running
    And every launch template's user data has "[settings.kubernetes]"
    And every launch template's user data has "example.com/special-taint"

  Scenario: a class whose role does not exist is not Ready and launches nothing
    Given the manifests:
      """
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: default}
      spec:
        template:
          spec:
            requirements:
              - {key: kubernetes.io/arch, operator: In, values: [amd64]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      ---
      apiVersion: karpenter.k8s.aws/v1
      kind: EC2NodeClass
      metadata: {name: default}
      spec:
        role: KarpenterNodeRole-typo
        amiSelectorTerms: [{alias: al2023@latest}]
        subnetSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
        securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
      """
    When the Deployment "web" with 2 replicas requesting 1 CPU is created
    And 3 minutes pass
    Then no node was launched
    And the EC2NodeClass "default" has "InstanceProfileReady" = "False" saying "KarpenterNodeRole-typo"
    And the EC2NodeClass "default" has "Ready" = "False" saying ""

  Scenario: a class naming an instance profile that does not exist is not Ready and launches nothing
    Given the manifests:
      """
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: default}
      spec:
        template:
          spec:
            requirements:
              - {key: kubernetes.io/arch, operator: In, values: [amd64]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      ---
      apiVersion: karpenter.k8s.aws/v1
      kind: EC2NodeClass
      metadata: {name: default}
      spec:
        instanceProfile: KarpenterNodeInstanceProfile-nobody-made
        amiSelectorTerms: [{alias: al2023@latest}]
        subnetSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
        securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
      """
    When the Deployment "web" with 2 replicas requesting 1 CPU is created
    And 3 minutes pass
    Then no node was launched
    And the EC2NodeClass "default" has "InstanceProfileReady" = "False" saying "does not exist"

  Scenario: a class selecting an AMI id EC2 does not know is not Ready and launches nothing
    Given the manifests:
      """
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: default}
      spec:
        template:
          spec:
            requirements:
              - {key: kubernetes.io/arch, operator: In, values: [amd64]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      ---
      apiVersion: karpenter.k8s.aws/v1
      kind: EC2NodeClass
      metadata: {name: default}
      spec:
        role: KarpenterNodeRole-sim
        amiFamily: AL2023
        amiSelectorTerms: [{id: ami-123}, {id: ami-0123456789abcdef0}]
        subnetSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
        securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
      """
    When the Deployment "web" with 2 replicas requesting 1 CPU is created
    And 3 minutes pass
    Then no node was launched
    And the EC2NodeClass "default" has "AMIsReady" = "False" saying "no AMI matches"

  Scenario: pods fall through to the next NodePool while the heavier one's EC2NodeClass resolves no subnets
    Given the manifests:
      """
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: primary}
      spec:
        weight: 100
        template:
          spec:
            requirements:
              - {key: kubernetes.io/arch, operator: In, values: [amd64]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: broken}
      ---
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: fallback}
      spec:
        weight: 1
        template:
          spec:
            requirements:
              - {key: kubernetes.io/arch, operator: In, values: [amd64]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      ---
      apiVersion: karpenter.k8s.aws/v1
      kind: EC2NodeClass
      metadata: {name: default}
      spec:
        role: KarpenterNodeRole-sim
        amiSelectorTerms: [{alias: al2023@latest}]
        subnetSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
        securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
      ---
      apiVersion: karpenter.k8s.aws/v1
      kind: EC2NodeClass
      metadata: {name: broken}
      spec:
        role: KarpenterNodeRole-sim
        amiSelectorTerms: [{alias: al2023@latest}]
        subnetSelectorTerms: [{tags: {karpenter.sh/discovery: nowhere}}]
        securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
      """
    When the Deployment "web" with 2 replicas requesting 1 CPU is created
    Then within 3 minutes all pods of "web" are Running
    And every node has label "karpenter.sh/nodepool" = "fallback"
    And the EC2NodeClass "broken" has "Ready" = "False" saying ""

  Scenario: a deleted EC2NodeClass waits for its nodes, then takes its launch templates and instance profile with it
    # Its NodePool is not Ready while the class terminates (upstream: NodeClassTerminating), so
    # nothing new launches and nothing is consolidated: the user deletes the nodes.
    Given the NodePool "default" from "seed-000-default.yaml"
    When the Deployment "web" with 2 replicas requesting 1 CPU is created
    Then within 3 minutes all pods of "web" are Running
    When the EC2NodeClass "default" is deleted
    Then within 2 minutes the EC2NodeClass "default" waits for its NodeClaims, keeping its instance profile
    When the NodeClaim of the node running "web" is deleted
    Then within 10 minutes the EC2NodeClass "default" is gone with its launch templates and instance profile
