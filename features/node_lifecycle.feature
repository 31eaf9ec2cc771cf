Feature: Node lifecycle
  A NodeClaim becomes a node: the instance is launched, its kubelet registers, the node is
  initialized once ready, and it carries what its NodePool says. An instance that never joins is
  given up on and replaced, and nothing is left running that no NodeClaim owns.

  Scenario: a launched node registers, initializes and is labelled by Karpenter
    Given the NodePool "default" from "seed-000-default.yaml"
    When the Deployment "web" with 3 replicas requesting 1 CPU is created
    Then within 2 minutes all 3 pods are Running
    And every NodeClaim is Launched, Registered and Initialized
    And every node belongs to NodePool "default"
    And every node has label "karpenter.sh/registered" = "true"
    And every node has label "karpenter.sh/initialized" = "true"
    And every node's labels match its instance
    And no node has a taint with key "karpenter.sh/unregistered"

  Scenario: a node is owned by its NodeClaim and protected by Karpenter's finalizer
    Given the NodePool "default" from "seed-000-default.yaml"
    When the Deployment "web" with 3 replicas requesting 1 CPU is created
    Then within 2 minutes all 3 pods are Running
    And every node is owned by its NodeClaim

  Scenario: the NodePool template's labels and taints are on the node
    Given the NodePool "team-a" from "seed-002-bottlerocket-and-taints.yaml"
    When the Deployment "myapp" from "seed-002-bottlerocket-and-taints.yaml" is created
    Then within 3 minutes all 3 pods are Running
    And every node has label "team" = "team-a"
    And every node is tainted "example.com/special-taint=true:NoSchedule"
    And every node belongs to NodePool "team-a"

  Scenario: startup taints are gone before the node counts as initialized
    Given the NodePool "agents":
      """
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: agents}
      spec:
        template:
          spec:
            requirements:
              - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}
            startupTaints:
              - {key: example.com/agent-not-ready, effect: NoSchedule}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      """
    And the EC2NodeClass "default" from "seed-000-default.yaml"
    When the Deployment "web" with 2 replicas requesting 1 CPU is created
    Then within 3 minutes all 2 pods are Running
    And every NodeClaim is Launched, Registered and Initialized
    And no node has a taint with key "example.com/agent-not-ready"

  Scenario: an instance that never boots is replaced after the registration timeout
    Given the NodePool "default" from "seed-000-default.yaml"
    And no instance boots
    When the Deployment "web" with 2 replicas requesting 1 CPU is created
    And 2 minutes pass
    And instances boot normally again
    Then within 20 minutes all 2 pods are Running
    And a NodeClaim had a "FailedLaunch" event saying "did not register"
    And every instance that never became a node was terminated

  Scenario: slow boots are waited for, not replaced
    Given the NodePool "default" from "seed-000-default.yaml"
    And every instance boots slowly
    When the Deployment "web" with 3 replicas requesting 1 CPU is created
    Then within 12 minutes all 3 pods are Running
    And exactly 1 node was launched
    And no NodeClaim had a "FailedLaunch" event

  # Upstream leaves a NodePool out of provisioning until its NodeClass exists and is ready.
  Scenario: a NodePool whose EC2NodeClass is missing is passed over for the next one
    Given the NodePool "default" from "seed-000-default.yaml"
    And the NodePool "orphaned":
      """
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: orphaned}
      spec:
        weight: 100
        template:
          spec:
            requirements:
              - {key: karpenter.k8s.aws/instance-category, operator: In, values: [m]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: missing}
      """
    When the Deployment "web" with 2 replicas requesting 1 CPU is created
    Then within 3 minutes all 2 pods are Running
    And every node belongs to NodePool "default"
