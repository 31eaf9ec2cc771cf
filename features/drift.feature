Feature: Drift
  A platform team patches its fleet by changing what nodes should be: a new AMI release behind
  an `@latest` alias, a NodePool template, an EC2NodeClass's tags or security groups, a
  narrower requirement. Karpenter marks every NodeClaim that no longer matches `Drifted` with
  the reason, and replaces those nodes, replacement first, within the NodePool's disruption
  budgets, never against a do-not-disrupt pod. What does not count as drift (a weight, a pinned
  AMI alias) replaces nothing.

  # ---- what drifts ----

  Scenario: an AMI release rolls the nodes of an al2023@latest class
    Given an on-demand NodePool "default" that consolidates WhenEmpty after "1h"
    And the Deployment "web" with 3 replicas requesting 1500m CPU is running
    When a new AL2023 AMI is released
    Then within 10 minutes a NodeClaim is drifted because "AMIDrift"
    And within 30 minutes every node was launched after that change
    And within 3 minutes all pods of "web" are Running
    And a NodeClaim had a "DisruptionLaunching" event saying "Drifted"

  Scenario: an AMI release leaves the nodes of a pinned alias alone
    Given an on-demand NodePool "default" that consolidates WhenEmpty after "1h"
    And the EC2NodeClass "default" selects AMIs by alias "al2023@v20250601"
    And the Deployment "web" with 3 replicas requesting 1500m CPU is running
    When a new AL2023 AMI is released
    Then for 15 minutes no NodeClaim is drifted
    And no node was disrupted as "Drifted"

  Scenario: a NodePool template label change replaces every node with one that has the label
    Given an on-demand NodePool "default" that consolidates WhenEmpty after "1h"
    And the Deployment "web" with 2 replicas requesting 1500m CPU is running
    When the NodePool "default" template gets the label "team=payments"
    Then within 5 minutes a NodeClaim is drifted because "NodePoolDrifted"
    And within 30 minutes every node was launched after that change
    And every node has label "team" = "payments"

  Scenario: a NodePool weight change drifts nothing
    Given an on-demand NodePool "default" that consolidates WhenEmpty after "1h"
    And the Deployment "web" with 2 replicas requesting 1500m CPU is running
    When the NodePool "default" weight is set to 50
    Then for 15 minutes no NodeClaim is drifted
    And no node was disrupted as "Drifted"

  Scenario: an EC2NodeClass tag change drifts its nodes
    Given an on-demand NodePool "default" that consolidates WhenEmpty after "1h"
    And the Deployment "web" with 2 replicas requesting 1500m CPU is running
    When the EC2NodeClass "default" gets the tag "cost-center=1234"
    Then within 5 minutes a NodeClaim is drifted because "NodeClassDrift"
    And within 30 minutes every node was launched after that change
    And every Karpenter instance is tagged "cost-center" = "1234"

  Scenario: a new security group on the EC2NodeClass replaces every node with one in it
    Given an on-demand NodePool "default" that consolidates WhenEmpty after "1h"
    And the Deployment "web" with 2 replicas requesting 1500m CPU is running
    When the EC2NodeClass "default" moves to the new security group "nodes-v2"
    Then within 5 minutes a NodeClaim is drifted because "SecurityGroupDrift"
    And within 30 minutes every node was launched after that change
    And every node runs in the security group "nodes-v2"

  Scenario: a narrower requirement drifts only the nodes that no longer match it
    Given an on-demand NodePool "default" that consolidates WhenEmpty after "1h"
    And the Deployment "web" with 3 replicas requesting 500m CPU is running with:
      """
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: topology.kubernetes.io/zone
          whenUnsatisfiable: ScheduleAnyway
          labelSelector:
            matchLabels: {app: web}
      """
    When the NodePool "default" allows only "us-west-2a" for "topology.kubernetes.io/zone"
    Then within 5 minutes a NodeClaim is drifted because "RequirementsDrifted"
    And within 30 minutes only the nodes outside "us-west-2a" were replaced
    And within 3 minutes all pods of "web" are Running

  # ---- what holds a roll ----

  Scenario: a budget window for Drifted holds the roll until it opens
    Given an on-demand NodePool "default" that consolidates WhenEmpty after "1h"
    And the NodePool "default" has the disruption budgets:
      """
      - nodes: "100%"
      - nodes: "0"
        reasons: [Drifted]
        schedule: "0 0 * * *"
        duration: 30m
      """
    And the Deployment "web" with 2 replicas requesting 1500m CPU is running
    When a new AL2023 AMI is released
    Then within 5 minutes a NodeClaim is drifted because "AMIDrift"
    And for 15 minutes no node is disrupted
    And within 30 minutes every node was launched after that change

  Scenario: a do-not-disrupt pod holds its drifted node until its duration passes
    Given an on-demand NodePool "default" that consolidates WhenEmpty after "1h"
    And the Deployment "db" with 1 replica requesting 1500m CPU is running
    And the pods of "db" are annotated "karpenter.sh/do-not-disrupt=30m"
    When a new AL2023 AMI is released
    Then within 5 minutes the node running "db" is kept because "do-not-disrupt"
    And for 15 minutes no node is disrupted
    And within 30 minutes every node was launched after that change

  Scenario: expiration still replaces nodes while a zero budget holds drift
    Given an on-demand NodePool "default" that consolidates WhenEmpty after "1h"
    And the NodePool "default" expires nodes after "30m"
    And the NodePool "default" has the disruption budgets:
      """
      - nodes: "0"
      """
    And the Deployment "web" with 1 replica requesting 1500m CPU is running
    When a new AL2023 AMI is released
    Then within 5 minutes a NodeClaim is drifted because "AMIDrift"
    And within 5 minutes the node running "web" is kept because "budget of nodepool default"
    And within 40 minutes a NodeClaim had an "Expired" event saying "expireAfter 30m"
    And within 10 minutes every node was launched after that change
    And within 5 minutes all pods of "web" are Running

  Scenario: pods under a PodDisruptionBudget stay available while their nodes roll
    Given an on-demand NodePool "default" that consolidates WhenEmpty after "1h"
    And the Deployment "web" with 3 replicas requesting 1500m CPU is running
    And a PodDisruptionBudget keeps at least 2 pods of "web" available
    When a new AL2023 AMI is released
    Then for 20 minutes at least 2 pods of "web" are Running
    And within 20 minutes every node was launched after that change
