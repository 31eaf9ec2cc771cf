Feature: Scheduling constraints
  The nodes launched for a pod are nodes the pod can run on: its nodeSelector, node affinity,
  tolerations, topology spread and pod (anti-)affinity shape what is launched, and a pod no
  NodePool can satisfy waits with a reason instead of getting a node it cannot use.

  Scenario: a zone nodeSelector puts every node in that zone
    Given the NodePool "default" from "seed-000-default.yaml"
    When the Deployment "zonal" with 6 replicas requesting 1 CPU is created with:
      """
      nodeSelector:
        topology.kubernetes.io/zone: us-west-2b
      """
    Then within 2 minutes all 6 pods are Running
    And every node is in zone "us-west-2b"

  Scenario: pods that require arm64 get Graviton nodes
    Given the NodePool "multiarch":
      """
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: multiarch}
      spec:
        template:
          spec:
            requirements:
              - {key: kubernetes.io/arch, operator: In, values: [amd64, arm64]}
              - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
              - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      """
    And the EC2NodeClass "default" from "seed-000-default.yaml"
    When the Deployment "arm" with 4 replicas requesting 1 CPU is created with:
      """
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions:
                  - {key: kubernetes.io/arch, operator: In, values: [arm64]}
      """
    Then within 2 minutes all 4 pods are Running
    And every node has label "kubernetes.io/arch" = "arm64"

  Scenario: pods that require on-demand capacity get it although spot is cheaper
    Given the NodePool "default" from "seed-000-default.yaml"
    When the Deployment "steady" with 4 replicas requesting 1 CPU is created with:
      """
      nodeSelector:
        karpenter.sh/capacity-type: on-demand
      """
    Then within 2 minutes all 4 pods are Running
    And every node is an on-demand instance

  Scenario: tolerating pods run on the tainted team NodePool of the Bottlerocket example
    Given the NodePool "team-a" from "seed-002-bottlerocket-and-taints.yaml"
    When the Deployment "myapp" from "seed-002-bottlerocket-and-taints.yaml" is created
    Then within 3 minutes all 3 pods are Running
    And every node has label "team" = "team-a"
    And every node is tainted "example.com/special-taint=true:NoSchedule"
    And every node's zone is one of "us-west-2a, us-west-2b"

  Scenario: pods without the toleration get no node from a tainted NodePool
    Given the NodePool "team-a" from "seed-002-bottlerocket-and-taints.yaml"
    When the Deployment "plain" with 2 replicas requesting 1 CPU is created
    Then for 3 minutes the pods of "plain" stay Pending
    And no node was launched
    And a FailedScheduling event for a pod of "plain" says "does not tolerate taint example.com/special-taint"

  Scenario: a nodeSelector on a label no NodePool sets leaves the pods pending
    Given the NodePool "default" from "seed-000-default.yaml"
    When the Deployment "ssd" with 2 replicas requesting 1 CPU is created with:
      """
      nodeSelector:
        disktype: ssd
      """
    Then for 3 minutes the pods of "ssd" stay Pending
    And no node was launched
    And a FailedScheduling event for a pod of "ssd" says "disktype"

  Scenario: zonal topology spread over three zones puts two pods in each
    Given the NodePool "default" from "seed-000-default.yaml"
    When the Deployment "spread" with 6 replicas requesting 1 CPU is created with:
      """
      topologySpreadConstraints:
        - maxSkew: 1
          minDomains: 3
          topologyKey: topology.kubernetes.io/zone
          whenUnsatisfiable: DoNotSchedule
          labelSelector:
            matchLabels: {app: spread}
      """
    Then within 3 minutes all 6 pods are Running
    And the pods of "spread" are spread 2 per zone across 3 zones

  Scenario: hostname anti-affinity gives every pod its own node
    Given the NodePool "default" from "seed-000-default.yaml"
    When the Deployment "solo" with 4 replicas requesting 500m CPU is created with:
      """
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - topologyKey: kubernetes.io/hostname
              labelSelector:
                matchLabels: {app: solo}
      """
    Then within 3 minutes all 4 pods are Running
    And each pod of "solo" runs on its own node
    And exactly 4 nodes were launched

  Scenario: pod affinity brings pods into the zone of the pods they follow
    Given the NodePool "default" from "seed-000-default.yaml"
    And the Deployment "db" with 1 replica requesting 1 CPU is running with:
      """
      nodeSelector:
        topology.kubernetes.io/zone: us-west-2c
      """
    When the Deployment "web" with 6 replicas requesting 2 CPU is created with:
      """
      affinity:
        podAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - topologyKey: topology.kubernetes.io/zone
              labelSelector:
                matchLabels: {app: db}
      """
    Then within 3 minutes all 7 pods are Running
    And every pod of "web" runs in zone "us-west-2c"

  Scenario: a preference nothing can meet is relaxed instead of blocking the pods
    Given the NodePool "default" from "seed-000-default.yaml"
    When the Deployment "hopeful" with 3 replicas requesting 1 CPU is created with:
      """
      affinity:
        nodeAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              preference:
                matchExpressions:
                  - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}
      """
    Then within 2 minutes all 3 pods are Running
