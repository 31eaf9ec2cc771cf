Feature: Disruption
  Karpenter removes nodes that are no longer needed and replaces nodes that cost more than their
  pods need: empty nodes go, nodes whose pods fit elsewhere are deleted, an underutilized node is
  replaced by one cheaper node, several by at most one. It never does so against a
  do-not-disrupt pod or node, a PodDisruptionBudget that allows no eviction, or the NodePool's
  disruption budgets, and it says which one kept a node. Expired nodes go regardless.

  # ---- what goes ----

  Scenario: an empty node is removed once its pods are gone
    Given an on-demand NodePool "default" that consolidates WhenEmptyOrUnderutilized after "30s"
    And the Deployment "web" with 3 replicas requesting 500m CPU is running
    When the Deployment "web" is scaled to 0 replicas
    Then within 5 minutes the cluster has 0 nodes
    And within 1 minute a node is disrupted as "Empty"

  Scenario: a node running only DaemonSet pods counts as empty
    Given an on-demand NodePool "default" that consolidates WhenEmpty after "30s"
    And a DaemonSet "log-agent" requesting 100m CPU runs on every node
    And the Deployment "web" with 2 replicas requesting 500m CPU is running
    When the Deployment "web" is scaled to 0 replicas
    Then within 5 minutes the cluster has 0 nodes

  Scenario: the big nodes of a finished burst are replaced by one cheap node for what is left
    Given an on-demand NodePool "default" that consolidates WhenEmptyOrUnderutilized after "1m"
    And the Deployment "burst" with 2 replicas requesting 6 CPU is running
    And the Deployment "web" with 3 replicas requesting 500m CPU is running
    When the Deployment "burst" is deleted
    Then within 15 minutes the nodes cost less than 0.16 dollars per hour
    And within 5 minutes the cluster has 1 node
    And within 3 minutes all pods of "web" are Running
    And within 1 minute a node is disrupted as "Underutilized"

  Scenario: an oversized node is replaced by one cheaper node before its pods move
    Given an on-demand NodePool "default" that consolidates WhenEmptyOrUnderutilized after "1m"
    And the Deployment "burst" with 1 replica requesting 6 CPU is running
    And the Deployment "web" with 1 replica requesting 500m CPU is running
    When the Deployment "burst" is deleted
    Then within 15 minutes the nodes cost less than 0.1 dollars per hour
    And within 3 minutes all pods of "web" are Running
    And within 1 minute a node is disrupted as "Underutilized"
    And within 5 minutes the cluster has 1 node

  Scenario: a restart in the middle of a replacement finishes it
    Given an on-demand NodePool "default" that consolidates WhenEmptyOrUnderutilized after "1m"
    And the Deployment "burst" with 1 replica requesting 6 CPU is running
    And the Deployment "web" with 1 replica requesting 500m CPU is running
    When the Deployment "burst" is deleted
    Then within 10 minutes a node is disrupted as "Underutilized"
    When the controller restarts
    Then within 15 minutes the nodes cost less than 0.1 dollars per hour
    And within 3 minutes all pods of "web" are Running
    And within 2 minutes no node is tainted "karpenter.sh/disrupted:NoSchedule"

  Scenario: a replacement that never initializes abandons the command and the node is untainted
    Given an on-demand NodePool "default" that consolidates WhenEmptyOrUnderutilized after "1m"
    And the Deployment "burst" with 1 replica requesting 6 CPU is running
    And the Deployment "web" with 1 replica requesting 500m CPU is running
    When new instances stop booting
    And the Deployment "burst" is deleted
    Then within 10 minutes a node is disrupted as "Underutilized"
    And within 12 minutes a NodeClaim had a "DisruptionAbandoned" event saying "did not initialize within 600s"
    And within 1 minute no node is tainted "karpenter.sh/disrupted:NoSchedule"
    And for 4 minutes at least 1 pod of "web" is Running
    And within 1 minute the cluster has at most 1 node

  Scenario: pods under a PodDisruptionBudget stay available while their nodes are consolidated
    Given an on-demand NodePool "default" that consolidates WhenEmptyOrUnderutilized after "1m"
    And the Deployment "burst" with 2 replicas requesting 6 CPU is running
    And the Deployment "web" with 3 replicas requesting 500m CPU is running
    And a PodDisruptionBudget keeps at least 2 pods of "web" available
    When the Deployment "burst" is deleted
    Then for 15 minutes at least 2 pods of "web" are Running
    And within 10 minutes the cluster has 1 node

  # ---- what stays, and why ----

  Scenario: WhenEmpty keeps an underutilized node and says so
    Given an on-demand NodePool "default" that consolidates WhenEmpty after "1m"
    And the Deployment "burst" with 1 replica requesting 6 CPU is running
    And the Deployment "web" with 1 replica requesting 500m CPU is running
    When the Deployment "burst" is deleted
    Then within 5 minutes the node running "web" is kept because "consolidationPolicy WhenEmpty"
    And no node was disrupted as "Underutilized"

  Scenario: a do-not-disrupt pod keeps its node and is named
    Given an on-demand NodePool "default" that consolidates WhenEmptyOrUnderutilized after "1m"
    And the Deployment "burst" with 1 replica requesting 6 CPU is running
    And the Deployment "db" with 1 replica requesting 500m CPU is running
    And the pods of "db" are annotated "karpenter.sh/do-not-disrupt=true"
    When the Deployment "burst" is deleted
    Then within 5 minutes the node running "db" is kept because "do-not-disrupt"
    And for 10 minutes no node is disrupted

  Scenario: a do-not-disrupt duration protects a pod only until it runs out
    Given an on-demand NodePool "default" that consolidates WhenEmptyOrUnderutilized after "1m"
    And the Deployment "burst" with 1 replica requesting 6 CPU is running
    And the Deployment "db" with 1 replica requesting 500m CPU is running
    And the pods of "db" are annotated "karpenter.sh/do-not-disrupt=20m"
    When the Deployment "burst" is deleted
    Then within 5 minutes the node running "db" is kept because "do-not-disrupt"
    And within 30 minutes a node is disrupted as "Underutilized"
    And within 10 minutes the nodes cost less than 0.1 dollars per hour

  Scenario: a do-not-disrupt node is left alone
    Given an on-demand NodePool "default" that consolidates WhenEmptyOrUnderutilized after "1m"
    And the Deployment "burst" with 1 replica requesting 6 CPU is running
    And the Deployment "web" with 1 replica requesting 500m CPU is running
    When the node running "web" is annotated "karpenter.sh/do-not-disrupt=true"
    And the Deployment "burst" is deleted
    Then within 5 minutes the node running "web" is kept because "node has karpenter.sh/do-not-disrupt"
    And for 10 minutes no node is disrupted

  Scenario: a PodDisruptionBudget that allows no eviction keeps the node and is named
    Given an on-demand NodePool "default" that consolidates WhenEmptyOrUnderutilized after "1m"
    And the Deployment "burst" with 1 replica requesting 6 CPU is running
    And the Deployment "web" with 1 replica requesting 500m CPU is running
    And a PodDisruptionBudget keeps at least 1 pod of "web" available
    When the Deployment "burst" is deleted
    Then within 5 minutes the node running "web" is kept because "pdb default/web-budget"
    And for 10 minutes no node is disrupted

  Scenario: consolidateAfter waits for the node to be quiet
    Given an on-demand NodePool "default" that consolidates WhenEmptyOrUnderutilized after "10m"
    And the Deployment "web" with 2 replicas requesting 500m CPU is running
    When the Deployment "web" is scaled to 0 replicas
    Then for 8 minutes no node is disrupted
    And within 5 minutes the cluster has 0 nodes

  Scenario: consolidateAfter Never turns consolidation off and says so
    Given an on-demand NodePool "default" that consolidates WhenEmptyOrUnderutilized after "Never"
    And the Deployment "burst" with 1 replica requesting 6 CPU is running
    And the Deployment "web" with 1 replica requesting 500m CPU is running
    When the Deployment "burst" is deleted
    Then within 5 minutes the node running "web" is kept because "consolidateAfter is Never"
    And for 10 minutes no node is disrupted

  Scenario: a spot node is not traded for a cheaper spot node while SpotToSpotConsolidation is off
    Given a spot NodePool "default" that consolidates WhenEmptyOrUnderutilized after "1m"
    And the Deployment "burst" with 1 replica requesting 6 CPU is running
    And the Deployment "web" with 1 replica requesting 500m CPU is running
    When the Deployment "burst" is deleted
    Then within 5 minutes the node running "web" is kept because "SpotToSpotConsolidation"
    And no node was disrupted as "Underutilized"

  # ---- budgets ----

  Scenario: a budget of zero nodes stops all disruption and says budget
    Given an on-demand NodePool "default" that consolidates WhenEmptyOrUnderutilized after "1m"
    And the NodePool "default" has the disruption budgets:
      """
      - nodes: "0"
      """
    And the Deployment "burst" with 1 replica requesting 6 CPU is running
    And the Deployment "web" with 1 replica requesting 500m CPU is running
    When the Deployment "burst" is deleted
    Then within 5 minutes the node running "web" is kept because "budget of nodepool default"
    And for 10 minutes no node is disrupted

  Scenario: a percentage budget limits how many nodes go at once
    Given an on-demand NodePool "default" that consolidates WhenEmptyOrUnderutilized after "30s"
    And the NodePool "default" has the disruption budgets:
      """
      - nodes: "50%"
      """
    And the Deployment "web" with 4 replicas requesting 500m CPU is running with:
      """
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector:
                matchLabels: {app: web}
              topologyKey: kubernetes.io/hostname
      """
    When the Deployment "web" is scaled to 0 replicas
    Then within 15 minutes the cluster has 0 nodes while at most 2 go away at once

  Scenario: a budget window closes disruption on its schedule and opens it after
    Given an on-demand NodePool "default" that consolidates WhenEmptyOrUnderutilized after "30s"
    And the NodePool "default" has the disruption budgets:
      """
      - nodes: "100%"
      - nodes: "0"
        schedule: "0 0 * * *"
        duration: 20m
      """
    And the Deployment "web" with 2 replicas requesting 500m CPU is running
    When the Deployment "web" is scaled to 0 replicas
    Then for 10 minutes no node is disrupted
    And within 15 minutes the cluster has 0 nodes

  Scenario: a budget scoped to Underutilized leaves empty nodes free to go
    Given an on-demand NodePool "default" that consolidates WhenEmptyOrUnderutilized after "30s"
    And the NodePool "default" has the disruption budgets:
      """
      - nodes: "0"
        reasons: [Underutilized]
      """
    And the Deployment "web" with 2 replicas requesting 500m CPU is running
    When the Deployment "web" is scaled to 0 replicas
    Then within 5 minutes the cluster has 0 nodes

  Scenario: a budget scoped to Empty keeps empty nodes
    Given an on-demand NodePool "default" that consolidates WhenEmptyOrUnderutilized after "30s"
    And the NodePool "default" has the disruption budgets:
      """
      - nodes: "0"
        reasons: [Empty]
      """
    And the Deployment "web" with 2 replicas requesting 500m CPU is running
    When the Deployment "web" is scaled to 0 replicas
    Then for 10 minutes no node is disrupted
    And within 1 minute the cluster has 1 node

  # ---- failures and expiry ----

  Scenario: an expired node is replaced even with a budget of zero
    Given an on-demand NodePool "default" that consolidates WhenEmptyOrUnderutilized after "Never"
    And the NodePool "default" expires nodes after "15m"
    And the NodePool "default" has the disruption budgets:
      """
      - nodes: "0"
      """
    And the Deployment "web" with 2 replicas requesting 500m CPU is running
    Then within 25 minutes a NodeClaim had an "Expired" event saying "expireAfter 15m"
    And within 5 minutes all pods of "web" are Running
