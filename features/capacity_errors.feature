Feature: Capacity errors and cloud faults
  EC2 runs out of capacity per instance type, zone and capacity type, throttles, fails and shows
  new instances late. The autoscaler works around each of these: it falls back to other
  offerings, waits for capacity to return, and never launches twice for the same need or leaves
  an instance behind.

  Background:
    Given the NodePool "m5":
      """
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: m5}
      spec:
        template:
          spec:
            requirements:
              - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}
              - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      """
    And the EC2NodeClass "default" from "seed-000-default.yaml"

  Scenario: no spot capacity anywhere falls back to on-demand
    Given spot capacity for "m5.large" is exhausted in every zone
    And spot capacity for "m5.xlarge" is exhausted in every zone
    When the Deployment "web" with 6 replicas requesting 500m CPU is created
    Then within 5 minutes all 6 pods are Running
    And every node is an on-demand instance
    And a NodeClaim had an "InsufficientCapacityError" event saying "InsufficientInstanceCapacity"

  Scenario: an instance type without capacity is replaced by one that has it
    Given all capacity for "m5.large" is exhausted in every zone
    When the Deployment "web" with 3 replicas requesting 500m CPU is created
    Then within 5 minutes all 3 pods are Running
    And every node's instance type is one of "m5.xlarge"

  Scenario: a zone without capacity is avoided
    Given all capacity for "m5.large" is exhausted in "us-west-2a"
    And all capacity for "m5.xlarge" is exhausted in "us-west-2a"
    When the Deployment "web" with 6 replicas requesting 1 CPU is created
    Then within 5 minutes all 6 pods are Running
    And every node's zone is one of "us-west-2b, us-west-2c"

  Scenario: with no capacity anywhere pods wait, nothing leaks, and they run once capacity returns
    Given all capacity for "m5.large" is exhausted in every zone
    And all capacity for "m5.xlarge" is exhausted in every zone
    When the Deployment "web" with 2 replicas requesting 500m CPU is created
    Then for 5 minutes the pods of "web" stay Pending
    And no instance is running
    When capacity for "m5.large" returns in every zone
    Then within 5 minutes all 2 pods are Running
    And every node's instance type is one of "m5.large"

  Scenario: spot capacity running out in the middle of a scale-up is worked around
    Given the Deployment "web" with 2 replicas requesting 1 CPU is running
    When spot capacity for "m5.large" runs out in every zone
    And spot capacity for "m5.xlarge" runs out in every zone
    And the Deployment "web" is scaled to 10 replicas
    Then within 5 minutes all 10 pods are Running
    And none of the new nodes is a spot "m5.large" instance
    And none of the new nodes is a spot "m5.xlarge" instance

  Scenario: pools that each hold one instance are all used, one instance each
    Given every capacity pool holds only 1 instance
    When the Deployment "solo" with 5 replicas requesting 500m CPU is created with:
      """
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - topologyKey: kubernetes.io/hostname
              labelSelector:
                matchLabels: {app: solo}
      """
    Then within 10 minutes all 5 pods are Running
    And no two nodes share an instance type, zone and capacity type

  Scenario Outline: EC2 throttling and server errors delay launches but never duplicate them
    Given the seed <seed>
    And EC2 throttles 30% of calls
    And EC2 fails 10% of calls with a server error
    When the Deployment "web" with 8 replicas requesting 500m CPU is created
    Then within 10 minutes all 8 pods are Running
    And at most 3 nodes were launched
    And the world really injected "ec2-throttle, ec2-5xx" faults

    Examples:
      | seed |
      | 1    |
      | 2    |
      | 3    |

  Scenario: instances EC2 shows late are not launched a second time
    Given EC2 shows new instances only after 20 seconds
    When the Deployment "web" with 8 replicas requesting 500m CPU is created
    Then within 5 minutes all 8 pods are Running
    And at most 3 nodes were launched

  Scenario Outline: API server errors and write conflicts do not stop provisioning
    Given the seed <seed>
    And the API server fails 5% of calls
    And 10% of API writes conflict
    When the Deployment "web" with 8 replicas requesting 500m CPU is created
    Then within 10 minutes all 8 pods are Running
    And at most 3 nodes were launched
    And the world really injected "api-5xx, api-conflict" faults

    Examples:
      | seed |
      | 1    |
      | 7    |
      | 8    |
