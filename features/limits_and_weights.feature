Feature: NodePool limits and weights
  A NodePool never grows past its limits, whatever is pending; among NodePools that can take a
  pod, the heaviest is used first, and pods go to the next one only when it cannot take them.

  Background:
    Given the EC2NodeClass "default" from "seed-000-default.yaml"

  Scenario: a cpu limit caps what a NodePool launches and the rest of the pods wait
    Given the NodePool "capped":
      """
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: capped}
      spec:
        template:
          spec:
            requirements:
              - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
        limits:
          cpu: 8
      """
    When the Deployment "web" with 20 replicas requesting 1 CPU is created
    And 5 minutes pass
    Then the NodeClaims of NodePool "capped" have at most 8 CPU in total
    And some pods of "web" are still Pending

  Scenario: a memory limit caps what a NodePool launches
    Given the NodePool "lean":
      """
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: lean}
      spec:
        template:
          spec:
            requirements:
              - {key: node.kubernetes.io/instance-type, operator: In, values: [r5.large, r5.xlarge]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
        limits:
          memory: 40Gi
      """
    When the Deployment "cache" with 10 replicas requesting 500m CPU and 6Gi memory is created
    And 5 minutes pass
    Then the NodeClaims of NodePool "lean" have at most 40Gi memory in total
    And some pods of "cache" are still Pending

  Scenario: a node-count limit caps how many nodes a NodePool has
    Given the NodePool "few":
      """
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: few}
      spec:
        template:
          spec:
            requirements:
              - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
        limits:
          nodes: 2
      """
    When the Deployment "web" with 8 replicas requesting 1 CPU is created
    And 5 minutes pass
    Then exactly 2 nodes were launched
    And some pods of "web" are still Pending

  Scenario: the heaviest NodePool that can take the pods is used
    Given the NodePools:
      """
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: reserved-first}
      spec:
        weight: 50
        template:
          spec:
            requirements:
              - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.xlarge]}
              - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      ---
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: cheap-spot}
      spec:
        weight: 10
        template:
          spec:
            requirements:
              - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
              - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      """
    When the Deployment "web" with 4 replicas requesting 500m CPU is created
    Then within 2 minutes all 4 pods are Running
    And every node belongs to NodePool "reserved-first"
    And every node is an on-demand instance

  Scenario: pods the heaviest NodePool has no room for go to the next one
    Given the NodePools:
      """
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: reserved-first}
      spec:
        weight: 50
        template:
          spec:
            requirements:
              - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.xlarge]}
              - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
        limits:
          cpu: 8
      ---
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: cheap-spot}
      spec:
        weight: 10
        template:
          spec:
            requirements:
              - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
              - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      """
    When the Deployment "web" with 16 replicas requesting 1 CPU is created
    Then within 3 minutes all 16 pods are Running
    And some nodes belong to NodePool "reserved-first"
    And some nodes belong to NodePool "cheap-spot"
    And the NodeClaims of NodePool "reserved-first" have at most 8 CPU in total

  Scenario: pods that name a NodePool get it whatever its weight
    Given the NodePools:
      """
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: heavy}
      spec:
        weight: 90
        template:
          spec:
            requirements:
              - {key: karpenter.k8s.aws/instance-category, operator: In, values: [m]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      ---
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: light}
      spec:
        weight: 1
        template:
          spec:
            requirements:
              - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      """
    When the Deployment "picky" with 3 replicas requesting 1 CPU is created with:
      """
      nodeSelector:
        karpenter.sh/nodepool: light
      """
    Then within 2 minutes all 3 pods are Running
    And every node belongs to NodePool "light"
    And every node has label "karpenter.k8s.aws/instance-category" = "c"

  Scenario: NodePools of equal weight are tried in name order
    Given the NodePools:
      """
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: beta}
      spec:
        weight: 10
        template:
          spec:
            requirements:
              - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      ---
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: alpha}
      spec:
        weight: 10
        template:
          spec:
            requirements:
              - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      """
    When the Deployment "web" with 4 replicas requesting 1 CPU is created
    Then within 2 minutes all 4 pods are Running
    And every node belongs to NodePool "alpha"

  Scenario: a NodePool reports its nodes and their resources in its status
    Given the NodePool "default" from "seed-000-default.yaml"
    When the Deployment "solo" with 3 replicas requesting 500m CPU is created with:
      """
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - topologyKey: kubernetes.io/hostname
              labelSelector:
                matchLabels: {app: solo}
      """
    Then within 3 minutes all 3 pods are Running
    And the NodePool "default" reports its 3 nodes and their CPU in its status
