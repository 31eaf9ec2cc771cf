Feature: Provisioning
  Pending pods get nodes: enough capacity, of the cheapest kind their NodePool allows, launched
  once for a burst of pods and not again for pods that fit on what is already there.

  Scenario: ten 500m pods get right-sized spot capacity
    Given the NodePool "default" from "seed-000-default.yaml"
    When the Deployment "nginx" from "seed-000-default.yaml" is created
    Then within 2 minutes all 10 pods are Running
    And the nodes launched have at least 5 vCPU in total and cost no more than needed
    And every node is a spot instance

  Scenario: the inflate example runs on spot-only capacity with its pinned AMI
    Given the NodePool "default" from "seed-003-spot-inflate.yaml"
    When the Deployment "inflate" from "seed-003-spot-inflate.yaml" is created
    Then within 2 minutes all 10 pods are Running
    And every node is a spot instance
    And the nodes launched have at least 5 vCPU in total and cost no more than needed

  Scenario: the general example launches only its four instance types
    Given the NodePool "general" from "seed-001-general.yaml"
    When the Deployment "web" with 12 replicas requesting 1 CPU and 1Gi memory is created
    Then within 3 minutes all 12 pods are Running
    And every node's instance type is one of "m6i.large, m6i.xlarge, m7i.large, c6i.large"
    And the nodes launched have at least 12 vCPU in total and cost no more than needed

  Scenario: a burst of pods is provisioned as one batch, not pod by pod
    Given the NodePool "default" from "seed-000-default.yaml"
    When the Deployment "burst" with 40 replicas requesting 250m CPU and 256Mi memory is created
    Then within 2 minutes all 40 pods are Running
    And exactly 1 node was launched
    And the nodes launched have at least 10 vCPU in total and cost no more than needed

  Scenario: pods that fit on the existing nodes launch nothing new
    Given the NodePool "default" from "seed-000-default.yaml"
    And the Deployment "nginx" from "seed-000-default.yaml" is running
    When the Deployment "nginx" is scaled to 14 replicas
    Then within 1 minute all 14 pods are Running
    And no new node was launched

  Scenario: pods arriving while a node launches use its spare room instead of another node
    Given the NodePool "default" from "seed-000-default.yaml"
    When the Deployment "nginx" from "seed-000-default.yaml" is created
    And 20 seconds pass
    And the Deployment "extra" with 2 replicas requesting 500m CPU is created
    Then within 2 minutes all 12 pods are Running
    And exactly 1 node was launched

  Scenario: scaling up adds capacity for the new pods and keeps the old nodes
    Given the NodePool "default" from "seed-000-default.yaml"
    And the Deployment "nginx" from "seed-000-default.yaml" is running
    When the Deployment "nginx" is scaled to 40 replicas
    Then within 2 minutes all 40 pods are Running
    And exactly 2 nodes were launched
    And the nodes launched have at least 20 vCPU in total and cost no more than needed

  Scenario: a pod too big for any instance type stays pending and says why
    Given the NodePool "default" from "seed-000-default.yaml"
    When the Deployment "huge" with 1 replica requesting 500 CPU is created
    Then for 3 minutes the pods of "huge" stay Pending
    And no node was launched
    And a FailedScheduling event for a pod of "huge" says 'NodePool "default"'

  Scenario: without a NodePool nothing is launched
    Given the EC2NodeClass "default" from "seed-000-default.yaml"
    When the Deployment "orphan" with 3 replicas requesting 500m CPU is created
    Then for 3 minutes the pods of "orphan" stay Pending
    And no node was launched
    And a FailedScheduling event for a pod of "orphan" says "no NodePool is ready"

  Scenario: pods waiting for a NodePool run once one is created
    Given the EC2NodeClass "default" from "seed-000-default.yaml"
    When the Deployment "web" with 3 replicas requesting 500m CPU is created
    And 1 minute passes
    And the NodePool "default" from "seed-000-default.yaml" is applied
    Then within 2 minutes all 3 pods are Running
    And every node belongs to NodePool "default"

  Scenario: a NodePool added for a team takes that team's pods
    Given the NodePool "default" from "seed-000-default.yaml"
    When this manifest is applied:
      """
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: batch}
      spec:
        template:
          metadata:
            labels: {team: batch}
          spec:
            requirements:
              - {key: karpenter.k8s.aws/instance-category, operator: In, values: [m]}
              - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      """
    And the Deployment "jobs" with 4 replicas requesting 1 CPU is created with:
      """
      nodeSelector:
        team: batch
      """
    Then within 2 minutes all 4 pods are Running
    And every node belongs to NodePool "batch"
    And every node is an on-demand instance
    And every node has label "team" = "batch"

  Scenario: memory-hungry pods get memory-optimised instances
    Given the NodePool "default" from "seed-000-default.yaml"
    When the Deployment "cache" with 4 replicas requesting 1 CPU and 28Gi memory is created
    Then within 2 minutes all 4 pods are Running
    And every node has label "karpenter.k8s.aws/instance-category" = "r"
    And the nodes launched have at least 4 vCPU in total and cost no more than needed
