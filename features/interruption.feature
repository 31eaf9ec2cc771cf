Feature: Interruption
  EC2 and AWS Health tell the cluster, through the interruption queue, when an instance is about
  to go: a spot interruption warning two minutes ahead, a scheduled maintenance, or a state
  change because it is already stopping or terminating. Karpenter launches replacement capacity
  first and evicts once it is ready (or when time is up), acts at once on an instance already
  going, only notes a rebalance recommendation, and keeps the queue moving whatever lands on it.

  Background:
    Given the NodePool "default" from "seed-000-default.yaml"

  Scenario: a spot interruption warning launches a replacement before evicting, and the pods run again within 2 minutes
    Given the Deployment "web" with 3 replicas requesting 500m CPU is running
    When the spot instance of the node running "web" gets an interruption warning
    Then within 2 minutes of the interruption all pods of "web" run on other nodes
    And exactly 1 NodeClaim was created to replace its NodeClaim
    And no pod on that node was evicted before its replacement was initialized
    And its replacement is not the interrupted spot offering
    And its NodeClaim had 1 "SpotInterrupted" event
    And within 3 minutes that node, its NodeClaim and its instance are gone

  Scenario: eviction starts 90 seconds after a spot warning when the replacement cannot come up
    Given the Deployment "web" with 2 replicas requesting 500m CPU is running
    When new instances stop booting
    And the spot instance of the node running "web" gets an interruption warning
    Then eviction on that node begins 90 seconds after the interruption
    And its replacement never initialized
    And its NodeClaim reported the condition "Drained" = "Unknown" because "AwaitingReplacement"

  Scenario: an instance terminated outside Karpenter is drained at once, without waiting for a replacement
    Given the Deployment "web" with 2 replicas requesting 500m CPU is running
    When the instance of the node running "web" is terminated outside Karpenter
    Then within 5 seconds its NodeClaim is being deleted
    And its NodeClaim had 1 "TerminatingOnInterruption" event
    And its NodeClaim never waited for a replacement
    And within 3 minutes all pods of "web" run on other nodes
    And within 3 minutes that node, its NodeClaim and its instance are gone

  Scenario: an instance stopped outside Karpenter is drained at once and replaced
    Given the Deployment "web" with 2 replicas requesting 500m CPU is running
    When the instance of the node running "web" is stopped outside Karpenter
    Then within 5 seconds its NodeClaim is being deleted
    And its NodeClaim never waited for a replacement
    And within 3 minutes all pods of "web" run on other nodes
    And within 5 minutes that node, its NodeClaim and its instance are gone

  Scenario: a rebalance recommendation only records an event
    Given the Deployment "web" with 2 replicas requesting 500m CPU is running
    When the spot instance of the node running "web" gets a rebalance recommendation
    Then for 5 minutes no NodeClaim is being deleted
    And every pod of "web" still runs on that node
    And no new node was launched
    And its NodeClaim had 1 "SpotRebalanceRecommendation" event

  Scenario: a duplicated interruption message causes one replacement
    Given the Deployment "web" with 2 replicas requesting 500m CPU is running
    When the spot instance of the node running "web" gets an interruption warning
    And that interruption message is delivered 2 more times
    And 30 seconds pass
    And that interruption message is delivered 1 more time
    Then within 2 minutes of the interruption all pods of "web" run on other nodes
    And exactly 1 NodeClaim was created to replace its NodeClaim
    And exactly 2 nodes were launched
    And its NodeClaim had 1 "TerminatingOnInterruption" event
    And within 1 minute the interruption queue is empty

  Scenario: malformed messages do not hold up the interruption queue
    Given the Deployment "web" with 2 replicas requesting 500m CPU is running
    When 25 malformed messages arrive on the interruption queue
    And the spot instance of the node running "web" gets an interruption warning
    Then within 5 seconds its NodeClaim is being deleted
    And within 1 minute the interruption queue is empty
    And within 2 minutes of the interruption all pods of "web" run on other nodes

  Scenario: an interruption for an instance no NodeClaim has is dropped
    Given the Deployment "web" with 2 replicas requesting 500m CPU is running
    When a spot interruption warning arrives for an instance no NodeClaim has
    Then within 5 seconds the interruption queue is empty
    And for 3 minutes no NodeClaim is being deleted
    And no new node was launched

  Scenario: a scheduled maintenance replaces the node before the maintenance starts
    Given the Deployment "web" with 3 replicas requesting 500m CPU is running
    When AWS schedules maintenance for the instance of the node running "web" in 1 hour
    Then within 5 seconds its NodeClaim is being deleted
    And within 3 minutes of the interruption all pods of "web" run on other nodes
    And exactly 1 NodeClaim was created to replace its NodeClaim
    And no pod on that node was evicted before its replacement was initialized
    And within 5 minutes that node, its NodeClaim and its instance are gone
