Feature: Node termination
  A node is taken away gracefully, whoever asks: deleting its NodeClaim or its Node taints it so
  nothing new lands there, evicts its pods through the Eviction API in tiers (workloads, then
  DaemonSet pods, then critical pods, then critical DaemonSet pods), respects
  PodDisruptionBudgets and do-not-disrupt pods until the NodePool's terminationGracePeriod says
  time is up, and terminates the instance only once the node is drained. The Node and the
  NodeClaim go when EC2 reports the instance terminated.

  Background:
    Given the NodePool "default" from "seed-000-default.yaml"

  Scenario: deleting a NodeClaim drains its node, terminates its instance and removes both
    Given the Deployment "web" with 3 replicas requesting 500m CPU is running
    When the NodeClaim of the node running "web" is deleted
    Then within 5 minutes that node, its NodeClaim and its instance are gone
    And within 3 minutes all pods of "web" run on other nodes
    And every pod of "web" that was on that node was evicted
    And its NodeClaim reported the condition "Drained" = "True"
    And its NodeClaim reported the condition "VolumesDetached" = "True"
    And its NodeClaim reported the condition "InstanceTerminating" = "True"

  Scenario: deleting a node deletes its NodeClaim and terminates its instance
    Given the Deployment "web" with 2 replicas requesting 500m CPU is running
    When the node running "web" is deleted
    Then within 5 seconds its NodeClaim is being deleted
    And within 5 minutes that node, its NodeClaim and its instance are gone
    And within 3 minutes all pods of "web" run on other nodes

  Scenario: a terminating node is tainted disrupted and nothing new is scheduled onto it
    Given the Deployment "db" with 1 replica requesting 500m CPU is running
    And the pods of "db" are annotated "karpenter.sh/do-not-disrupt=true"
    When the NodeClaim of the node running "db" is deleted
    Then within 5 seconds that node is tainted "karpenter.sh/disrupted:NoSchedule"
    When the Deployment "late" with 2 replicas requesting 250m CPU is created
    Then within 3 minutes all pods of "late" are Running
    And no pod of "late" was ever bound to that node

  Scenario: DaemonSet pods are evicted only after the other pods have left the node
    Given a DaemonSet "log-agent" requesting 100m CPU runs on every node
    And the Deployment "web" with 3 replicas requesting 500m CPU is running
    When the NodeClaim of the node running "web" is deleted
    Then within 5 minutes that node, its NodeClaim and its instance are gone
    And on that node the pods of "log-agent" were evicted only after every pod of "web" had left
    And every pod of "log-agent" that was on that node was evicted

  Scenario: critical pods are evicted after the others, critical DaemonSet pods last
    Given a critical DaemonSet "cni" requesting 100m CPU runs on every node
    And a DaemonSet "log-agent" requesting 100m CPU runs on every node
    When the Deployment "web" with 2 replicas requesting 500m CPU is created
    And the Deployment "dns" with 1 replica requesting 250m CPU is created with:
      """
      priorityClassName: system-cluster-critical
      """
    Then within 3 minutes all pods of "web" are Running
    And within 3 minutes all pods of "dns" are Running
    When the NodeClaim of the node running "web" is deleted
    Then within 5 minutes that node, its NodeClaim and its instance are gone
    And on that node the pods of "log-agent" were evicted only after every pod of "web" had left
    And on that node the pods of "dns" were evicted only after every pod of "log-agent" had left
    And on that node the pods of "cni" were evicted only after every pod of "dns" had left

  Scenario: a PodDisruptionBudget holds the drain until a replacement pod runs elsewhere
    Given the Deployment "web" with 2 replicas requesting 500m CPU is running
    And a PodDisruptionBudget keeps at least 1 pod of "web" available
    When the NodeClaim of the node running "web" is deleted
    Then for 3 minutes at least 1 pod of "web" is Running
    And within 2 minutes that node, its NodeClaim and its instance are gone
    And that node had a "FailedDraining" event saying "violates a PDB"
    And every pod of "web" that was on that node was evicted

  Scenario: a do-not-disrupt pod holds the drain until the terminationGracePeriod ends
    Given the NodePool "default" has a terminationGracePeriod of 3 minutes
    And the Deployment "batch" with 1 replica requesting 500m CPU is running
    And the pods of "batch" are annotated "karpenter.sh/do-not-disrupt=true"
    When the NodeClaim of the node running "batch" is deleted
    Then the pods of "batch" on that node are deleted 150 seconds after its NodeClaim was, not sooner
    And its NodeClaim reported the condition "Drained" = "Unknown" because "DisruptionBlocked"
    And a pod of "batch" had a "Disrupted" event saying "do-not-disrupt annotation"
    And within 2 minutes that node, its NodeClaim and its instance are gone

  Scenario: without a terminationGracePeriod a do-not-disrupt pod keeps its node, visibly
    Given the Deployment "batch" with 1 replica requesting 500m CPU is running
    And the pods of "batch" are annotated "karpenter.sh/do-not-disrupt=true"
    When the NodeClaim of the node running "batch" is deleted
    Then for 10 minutes the pods of "batch" stay on that node
    And its instance is still running
    And its NodeClaim reported the condition "Drained" = "Unknown" because "DisruptionBlocked"
    And that node had a "DisruptionBlocked" event saying "1 with karpenter.sh/do-not-disrupt"

  Scenario: the terminationGracePeriod deletes pods a PodDisruptionBudget will not let go
    Given the NodePool "default" has a terminationGracePeriod of 2 minutes
    And the Deployment "web" with 2 replicas requesting 500m CPU is running
    And a PodDisruptionBudget keeps at least 2 pods of "web" available
    When the NodeClaim of the node running "web" is deleted
    Then the pods of "web" on that node are deleted 90 seconds after its NodeClaim was, not sooner
    And that node had a "FailedDraining" event saying "violates a PDB"
    And a pod of "web" had a "Disrupted" event saying "bypasses the PDB"
    And within 2 minutes that node, its NodeClaim and its instance are gone

  Scenario: the instance is terminated only after the node is drained, and the node goes after it
    Given a DaemonSet "log-agent" requesting 100m CPU runs on every node
    And the Deployment "web" with 3 replicas requesting 500m CPU is running
    When the NodeClaim of the node running "web" is deleted
    Then within 5 minutes that node, its NodeClaim and its instance are gone
    And its instance began terminating only after every pod had left that node
    And that node was removed only after its instance was terminated
