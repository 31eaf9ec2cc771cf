Feature: Manifests
  NodePools and EC2NodeClasses written for Karpenter v1 are accepted as written; manifests in the
  older v1beta1 API are rejected with what to change, and the cluster never runs them.

  Scenario: the v1beta1 Ray example is rejected with how to move it to v1
    When "seed-004-v1beta1-ray.yaml" is validated
    Then EC2NodeClass "ray-worker-node-class" is rejected at "apiVersion" because "karpenter.k8s.aws/v1beta1 is the older v1beta1 API, which Karpenter v1 no longer serves"
    And the rejection of EC2NodeClass "ray-worker-node-class" says "rewrite it as karpenter.k8s.aws/v1"
    And the rejection of EC2NodeClass "ray-worker-node-class" says "replace amiFamily: AL2 with amiSelectorTerms: [{alias: al2@latest}]"
    And NodePool "ray-worker-nodepool" is rejected at "apiVersion" because "karpenter.sh/v1beta1 is the older v1beta1 API"
    And the rejection of NodePool "ray-worker-nodepool" says "spec.disruption.expireAfter moved to spec.template.spec.expireAfter (set expireAfter: 360h)"
    And the rejection of NodePool "ray-worker-nodepool" says "nodeClassRef needs group: karpenter.k8s.aws and kind: EC2NodeClass"

  Scenario: the cluster refuses the v1beta1 Ray example
    Given the manifests from "seed-004-v1beta1-ray.yaml"
    Then the cluster refuses the manifests because "is the older v1beta1 API, which Karpenter v1 no longer serves"

  Scenario Outline: the user's v1 examples are accepted as written
    When "<file>" is validated
    Then it holds the valid Karpenter objects "<objects>"
    And it skips "<workloads>"

    Examples:
      | file                                 | objects                                                                                                 | workloads          |
      | seed-000-default.yaml                | NodePool/default, EC2NodeClass/default                                                                  | Deployment/nginx   |
      | seed-001-general.yaml                | EC2NodeClass/default, NodePool/general                                                                  |                    |
      | seed-002-bottlerocket-and-taints.yaml | NodePool/team-a, EC2NodeClass/bottlerocket, EC2NodeClass/bottlerocket-pinned, EC2NodeClass/custom-ami | Deployment/myapp   |
      | seed-003-spot-inflate.yaml           | NodePool/default, EC2NodeClass/default                                                                  | Deployment/inflate |

  Scenario: the cluster stores the Bottlerocket example's objects as written
    Given the manifests from "seed-002-bottlerocket-and-taints.yaml"
    Then the cluster holds "NodePool/team-a, EC2NodeClass/bottlerocket, EC2NodeClass/bottlerocket-pinned, EC2NodeClass/custom-ami"

  Scenario: a numeric requirement with a non-number is rejected at the field
    When this manifest is validated:
      """
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: bad-generation}
      spec:
        template:
          spec:
            requirements:
              - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["two"]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      """
    Then NodePool "bad-generation" is rejected at "spec.template.spec.requirements[0].values" because "must have a single positive integer value"

  Scenario: a misspelt field is rejected instead of silently dropped
    When this manifest is validated:
      """
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: typo}
      spec:
        template:
          spec:
            requirement:
              - {key: kubernetes.io/arch, operator: In, values: [amd64]}
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      """
    Then NodePool "typo" is rejected at "spec.template.spec.requirement" because "unknown field"

  Scenario: a v1 NodePool without a nodeClassRef is rejected
    When this manifest is validated:
      """
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: classless}
      spec:
        template:
          spec:
            requirements:
              - {key: kubernetes.io/arch, operator: In, values: [amd64]}
      """
    Then NodePool "classless" is rejected at "spec.template.spec.nodeClassRef" because "Required value"
