#!/usr/bin/env python3
"""aws_clients_check.py FAKECLOUD TOOLS: real AWS clients against `fakecloud serve`.

Starts FAKECLOUD (the `fakecloud` binary) on a free port and drives it with
- the AWS CLI v1 (TOOLS/venv/bin/aws: botocore, SQS over JSON),
- the AWS CLI v2 (TOOLS/bin/aws2: Debian's 2.9.19, SQS over the Query protocol),
- boto3 (in TOOLS/venv, run as a child script),
covering EC2 (describe/run/terminate instances, create-fleet, launch templates, tags, spot price
history, instance types, dry runs), SQS send/receive/delete in both protocols (MD5OfBody checked
for a UTF-8 body that needs XML escaping), SSM get-parameter, IAM, EKS and the control API.
Prints one line per check and a summary; exits 1 if any check failed.
"""
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.request

CLUSTER = "clients"
AL2023 = "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id"
BODY = 'spot <warning> & "quotes" – ünïcode ✓'

results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f": {detail}" if detail and not ok else ""), flush=True)
    return ok


class Clients:
    def __init__(self, tools, endpoint):
        self.endpoint = endpoint
        self.v1 = os.path.join(tools, "venv", "bin", "aws")
        self.v2 = os.path.join(tools, "bin", "aws2")
        self.python = os.path.join(tools, "venv", "bin", "python")
        self.env = dict(os.environ)
        self.env.update({
            "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret",
            "AWS_DEFAULT_REGION": "us-west-2", "AWS_REGION": "us-west-2",
            "AWS_EC2_METADATA_DISABLED": "true", "AWS_PAGER": "",
            "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        })

    def run(self, cli, *args):
        """(return code, parsed JSON or None, stderr) of one CLI call."""
        out = subprocess.run([cli, "--endpoint-url", self.endpoint, "--output", "json", *args],
                             env=self.env, capture_output=True, text=True, timeout=60)
        try:
            parsed = json.loads(out.stdout) if out.stdout.strip() else {}
        except json.JSONDecodeError:
            parsed = None
        return out.returncode, parsed, out.stderr.strip()

    def control(self, path, body):
        request = urllib.request.Request(self.endpoint + "/fakecloud" + path, data=json.dumps(body).encode(),
                                         headers={"content-type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())


def visible(c, cli, instance_id):
    for _ in range(50):
        rc, out, _ = c.run(cli, "ec2", "describe-instances", "--instance-ids", instance_id)
        if rc == 0:
            return out
        time.sleep(0.2)
    return None


def ec2_checks(c, cli, label):
    rc, out, err = c.run(cli, "ec2", "describe-subnets", "--filters", f"Name=tag:karpenter.sh/discovery,Values={CLUSTER}")
    subnets = (out or {}).get("Subnets", [])
    check(f"{label} ec2 describe-subnets (Filter.N.Value.M, <item> lists)",
          rc == 0 and len(subnets) == 3 and all(s.get("AvailabilityZoneId") and s.get("AvailableIpAddressCount") for s in subnets), err)
    rc, out, err = c.run(cli, "ssm", "get-parameter", "--name", AL2023)
    image = ((out or {}).get("Parameter") or {}).get("Value", "")
    check(f"{label} ssm get-parameter (JSON 1.1)", rc == 0 and image.startswith("ami-"), err)
    rc, out, err = c.run(cli, "ec2", "run-instances", "--image-id", image, "--instance-type", "m5.large", "--count", "1", "--dry-run")
    check(f"{label} ec2 run-instances --dry-run answers DryRunOperation", rc != 0 and "DryRunOperation" in err, err)
    rc, out, err = c.run(cli, "ec2", "run-instances", "--image-id", image, "--instance-type", "m5.large", "--count", "1",
                         "--subnet-id", subnets[0]["SubnetId"] if subnets else "",
                         "--tag-specifications", f"ResourceType=instance,Tags=[{{Key=owner,Value={label}}}]")
    instances = (out or {}).get("Instances", [])
    check(f"{label} ec2 run-instances", rc == 0 and len(instances) == 1, err)
    run_id = instances[0]["InstanceId"] if instances else "i-00000000"
    described = visible(c, cli, run_id)
    found = [i for r in (described or {}).get("Reservations", []) for i in r["Instances"]]
    check(f"{label} ec2 describe-instances after the consistency lag", len(found) == 1 and found[0]["ImageId"] == image
          and {"Key": "owner", "Value": label} in found[0].get("Tags", []), str(described))
    rc, _, err = c.run(cli, "ec2", "create-tags", "--resources", run_id, "--tags", "Key=Name,Value=node")
    check(f"{label} ec2 create-tags", rc == 0, err)
    template = f"karpenter.k8s.aws/{label}"
    rc, out, err = c.run(cli, "ec2", "create-launch-template", "--launch-template-name", template,
                         "--launch-template-data", json.dumps({"ImageId": image, "UserData": "IyEvYmluL2Jhc2g="}))
    check(f"{label} ec2 create-launch-template", rc == 0 and out["LaunchTemplate"]["LaunchTemplateName"] == template, err)
    rc, _, err = c.run(cli, "ec2", "describe-launch-templates", "--launch-template-names", "karpenter.k8s.aws/missing")
    check(f"{label} a missing launch template is InvalidLaunchTemplateName.NotFoundException",
          rc != 0 and "InvalidLaunchTemplateName.NotFoundException" in err, err)
    overrides = [{"InstanceType": t, "SubnetId": s["SubnetId"]} for t in ("c5.large", "m5.large") for s in subnets]
    configs = json.dumps([{"LaunchTemplateSpecification": {"LaunchTemplateName": template, "Version": "$Latest"}, "Overrides": overrides}])
    rc, out, err = c.run(cli, "ec2", "create-fleet", "--type", "instant", "--launch-template-configs", configs,
                         "--target-capacity-specification", "TotalTargetCapacity=1,DefaultTargetCapacityType=spot")
    fleet = (out or {}).get("Instances", [])
    echoed = (fleet[0].get("LaunchTemplateAndOverrides") or {}).get("Overrides", {}) if fleet else {}
    check(f"{label} ec2 create-fleet echoes its override", rc == 0 and len(fleet) == 1 and fleet[0]["Lifecycle"] == "spot"
          and echoed.get("InstanceType") in ("c5.large", "m5.large") and echoed.get("SubnetId") and echoed.get("ImageId") == image, err or str(out))
    fleet_id = fleet[0]["InstanceIds"][0] if fleet else "i-00000000"
    spot = visible(c, cli, fleet_id)
    spot_instance = [i for r in (spot or {}).get("Reservations", []) for i in r["Instances"]]
    check(f"{label} a spot instance has its spotInstanceRequestId",
          len(spot_instance) == 1 and spot_instance[0].get("SpotInstanceRequestId", "").startswith("sir-"), str(spot))
    rc, out, err = c.run(cli, "ec2", "terminate-instances", "--instance-ids", run_id, fleet_id)
    states = sorted(s["CurrentState"]["Name"] for s in (out or {}).get("TerminatingInstances", []))
    check(f"{label} ec2 terminate-instances", rc == 0 and states == ["shutting-down", "shutting-down"], err or str(out))
    rc, out, err = c.run(cli, "ec2", "describe-spot-price-history", "--instance-types", "m5.large", "--product-descriptions", "Linux/UNIX")
    prices = (out or {}).get("SpotPriceHistory", [])
    check(f"{label} ec2 describe-spot-price-history", rc == 0 and len(prices) == 3 and all(float(p["SpotPrice"]) > 0 for p in prices), err)
    rc, out, err = c.run(cli, "ec2", "describe-instance-types", "--instance-types", "m5.large")
    types = (out or {}).get("InstanceTypes", [])
    check(f"{label} ec2 describe-instance-types", rc == 0 and types and types[0]["VCpuInfo"]["DefaultVCpus"] == 2
          and types[0]["MemoryInfo"]["SizeInMiB"] == 8192, err)


def reservation_checks(c, cli, label):
    """A capacity reservation made through the control API, read back by the client, and one
    on-demand launch EC2 puts into it because its launch template does not opt out."""
    made = c.control("/capacity-reservations", {"instanceType": "m5.large", "zone": "us-west-2a", "count": 2,
                                                "matchCriteria": "open", "tags": {"team": label}})
    rc, out, err = c.run(cli, "ec2", "describe-capacity-reservations", "--filters", f"Name=tag:team,Values={label}",
                         "Name=state,Values=active")
    found = (out or {}).get("CapacityReservations", [])
    check(f"{label} ec2 describe-capacity-reservations (filters, counts, match criteria)",
          rc == 0 and len(found) == 1 and found[0]["CapacityReservationId"] == made["id"]
          and found[0]["AvailableInstanceCount"] == 2 and found[0]["InstanceMatchCriteria"] == "open"
          # CLI v2 2.9.19's model predates `reservationType` and drops it, as it drops any
          # element its model does not know.
          and found[0].get("ReservationType", "default") == "default", err or str(out))
    rc, _, err = c.run(cli, "ec2", "describe-capacity-reservations", "--capacity-reservation-ids", "cr-0000000000000000a")
    check(f"{label} an unknown reservation id is InvalidCapacityReservationId.NotFound",
          rc != 0 and "InvalidCapacityReservationId.NotFound" in err, err)
    cancelled = c.control("/capacity-reservations/cancel", {"id": made["id"]})
    rc, out, err = c.run(cli, "ec2", "describe-capacity-reservations", "--capacity-reservation-ids", made["id"])
    state = ((out or {}).get("CapacityReservations") or [{}])[0].get("State")
    check(f"{label} a cancelled reservation reads cancelled", cancelled["cancelled"] and state == "cancelled", err or str(out))


def sqs_checks(c, cli, label):
    rc, out, err = c.run(cli, "sqs", "get-queue-url", "--queue-name", CLUSTER)
    url = (out or {}).get("QueueUrl", "")
    check(f"{label} sqs get-queue-url", rc == 0 and url.endswith(f"/{CLUSTER}"), err)
    rc, out, err = c.run(cli, "sqs", "send-message", "--queue-url", url, "--message-body", BODY)
    md5 = hashlib.md5(BODY.encode("utf-8")).hexdigest()
    check(f"{label} sqs send-message (MD5OfMessageBody of UTF-8)", rc == 0 and (out or {}).get("MD5OfMessageBody") == md5, err or str(out))
    rc, out, err = c.run(cli, "sqs", "receive-message", "--queue-url", url, "--max-number-of-messages", "10",
                         "--wait-time-seconds", "2", "--attribute-names", "All")
    messages = [m for m in (out or {}).get("Messages", []) if m.get("Body") == BODY]
    check(f"{label} sqs receive-message: body escaped and unescaped intact, MD5OfBody, SentTimestamp",
          rc == 0 and len(messages) == 1 and messages[0]["MD5OfBody"] == md5 and messages[0].get("Attributes", {}).get("SentTimestamp"),
          err or str(out))
    handle = messages[0]["ReceiptHandle"] if messages else "x"
    rc, _, err = c.run(cli, "sqs", "delete-message", "--queue-url", url, "--receipt-handle", handle)
    check(f"{label} sqs delete-message", rc == 0, err)
    rc, _, err = c.run(cli, "sqs", "receive-message", "--queue-url", url.replace(f"/{CLUSTER}", "/missing"))
    check(f"{label} a missing queue is AWS.SimpleQueueService.NonExistentQueue",
          rc != 0 and "NonExistentQueue" in err, err)


def iam_eks_checks(c, cli, label):
    rc, out, err = c.run(cli, "iam", "get-role", "--role-name", f"KarpenterNodeRole-{CLUSTER}")
    check(f"{label} iam get-role (Query, <member> lists)", rc == 0 and out["Role"]["RoleName"] == f"KarpenterNodeRole-{CLUSTER}", err)
    rc, out, err = c.run(cli, "iam", "create-instance-profile", "--instance-profile-name", f"{label}-profile",
                         "--path", f"/karpenter/us-west-2/{CLUSTER}/", "--tags", "Key=owner,Value=cli")
    check(f"{label} iam create-instance-profile", rc == 0 and out["InstanceProfile"]["Path"] == f"/karpenter/us-west-2/{CLUSTER}/", err)
    rc, _, err = c.run(cli, "iam", "add-role-to-instance-profile", "--instance-profile-name", f"{label}-profile", "--role-name", f"KarpenterNodeRole-{CLUSTER}")
    check(f"{label} iam add-role-to-instance-profile", rc == 0, err)
    rc, out, err = c.run(cli, "iam", "get-instance-profile", "--instance-profile-name", f"{label}-profile")
    check(f"{label} iam get-instance-profile lists its role", rc == 0 and [r["RoleName"] for r in out["InstanceProfile"]["Roles"]] == [f"KarpenterNodeRole-{CLUSTER}"], err)
    rc, _, err = c.run(cli, "iam", "get-instance-profile", "--instance-profile-name", "missing")
    check(f"{label} a missing profile is NoSuchEntity", rc != 0 and "NoSuchEntity" in err, err)
    rc, out, err = c.run(cli, "eks", "describe-cluster", "--name", CLUSTER)
    cluster = (out or {}).get("cluster", {})
    check(f"{label} eks describe-cluster (REST-JSON)", rc == 0 and cluster.get("status") == "ACTIVE"
          and cluster["kubernetesNetworkConfig"]["serviceIpv4Cidr"] == "10.100.0.0/16", err)


BOTO3 = r'''
import hashlib, json, sys, boto3, botocore
from botocore.config import Config
endpoint, cluster, body = sys.argv[1], sys.argv[2], sys.argv[3]
cfg = Config(retries={"max_attempts": 2, "mode": "standard"})
kw = dict(endpoint_url=endpoint, region_name="us-west-2", aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", config=cfg)
ec2, sqs, pricing = boto3.client("ec2", **kw), boto3.client("sqs", **kw), boto3.client("pricing", **kw)
out = {}
types = [t for page in ec2.get_paginator("describe_instance_types").paginate(PaginationConfig={"PageSize": 50}) for t in page["InstanceTypes"]]
out["types"] = len(types)
offerings = [o for page in ec2.get_paginator("describe_instance_type_offerings").paginate(LocationType="availability-zone") for o in page["InstanceTypeOfferings"]]
out["offerings"] = len(offerings)
url = sqs.get_queue_url(QueueName=cluster)["QueueUrl"]
sqs.send_message(QueueUrl=url, MessageBody=body)
got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=2, MessageSystemAttributeNames=["SentTimestamp"]).get("Messages", [])
mine = [m for m in got if m["Body"] == body]
out["md5"] = bool(mine) and mine[0]["MD5OfBody"] == hashlib.md5(body.encode()).hexdigest()
out["sent"] = bool(mine) and "SentTimestamp" in mine[0].get("Attributes", {})
for m in mine:
    sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
try:
    sqs.receive_message(QueueUrl=url.replace(cluster, "missing"))
    out["missing"] = "no error"
except sqs.exceptions.QueueDoesNotExist as e:
    out["missing"] = e.response["Error"]["Code"]
try:
    ec2.describe_launch_templates(LaunchTemplateNames=["nope"])
except botocore.exceptions.ClientError as e:
    out["template"] = e.response["Error"]["Code"]
products = pricing.get_products(ServiceCode="AmazonEC2", Filters=[{"Type": "TERM_MATCH", "Field": "instanceType", "Value": "m5.large"}, {"Type": "TERM_MATCH", "Field": "regionCode", "Value": "us-west-2"}])["PriceList"]
out["price"] = [json.loads(p)["terms"]["OnDemand"] for p in products] and float(list(list(json.loads(products[0])["terms"]["OnDemand"].values())[0]["priceDimensions"].values())[0]["pricePerUnit"]["USD"])
print(json.dumps(out))
'''


def boto3_checks(c):
    out = subprocess.run([c.python, "-c", BOTO3, c.endpoint, CLUSTER, BODY], env=c.env, capture_output=True, text=True, timeout=120)
    try:
        got = json.loads(out.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        check("boto3 script ran", False, out.stderr[-2000:])
        return
    check("boto3 describe_instance_types paginator (pages of 50)", got["types"] > 200, str(got))
    check("boto3 describe_instance_type_offerings paginator", got["offerings"] == 3 * got["types"], str(got))
    check("boto3 sqs send/receive/delete (JSON) with MD5OfBody and SentTimestamp", got["md5"] and got["sent"], str(got))
    check("boto3 QueueDoesNotExist keeps its query-compatible code", got["missing"] == "AWS.SimpleQueueService.NonExistentQueue", str(got))
    check("boto3 InvalidLaunchTemplateName.NotFoundException", got["template"] == "InvalidLaunchTemplateName.NotFoundException", str(got))
    check("boto3 pricing get_products", got["price"] == 0.096, str(got))


def control_checks(c):
    release = c.control("/ami-releases", {"family": "al2023", "release": "v20250701"})
    rc, out, err = c.run(c.v1, "ssm", "get-parameter", "--name", AL2023)
    check("control API: an AMI release moves the SSM alias", rc == 0 and out["Parameter"]["Value"] in release["imageIds"], err)
    c.control("/faults", {"operation": "DescribeSubnets", "script": ["Throttle", "Throttle", "Throttle", "Throttle", "Throttle"]})
    rc, _, err = c.run(c.v1, "ec2", "describe-subnets")
    check("control API: scripted throttling reaches the client as RequestLimitExceeded", rc != 0 and "RequestLimitExceeded" in err, err)
    c.control("/faults/clear", {})


def protocol_checks(c):
    """Which real client spoke which protocol, as the server saw them (user agents)."""
    with urllib.request.urlopen(c.endpoint + "/fakecloud/protocols", timeout=10) as response:
        spoken = json.loads(response.read())
    def by(protocol, prefix):
        return any(client.startswith(prefix) for client in spoken.get(protocol, []))
    for protocol, prefix in (("ec2-query", "aws-cli/1."), ("ec2-query", "aws-cli/2."), ("ec2-query", "Boto3/"),
                             ("sqs-json", "aws-cli/1."), ("sqs-json", "Boto3/"), ("sqs-query", "aws-cli/2."),
                             ("ssm-json", "aws-cli/"), ("iam-query", "aws-cli/"), ("eks-rest", "aws-cli/"),
                             ("pricing-json", "Boto3/")):
        check(f"{prefix} spoke {protocol}", by(protocol, prefix), str(spoken))
    print("protocols spoken: " + json.dumps(spoken, sort_keys=True), flush=True)


def main():
    fakecloud, tools = sys.argv[1], sys.argv[2]
    server = subprocess.Popen([fakecloud, "serve", "--listen", "127.0.0.1:0", "--seed", "3", "--cluster", CLUSTER],
                              stdout=subprocess.PIPE, text=True)
    try:
        endpoint = None
        for line in server.stdout:
            if line.startswith("AWS_ENDPOINT_URL="):
                endpoint = line.strip().split("=", 1)[1]
                break
        if not endpoint:
            print("FAIL fakecloud serve printed no endpoint")
            return 1
        c = Clients(tools, endpoint)
        for cli, label in ((c.v1, "cli-v1"), (c.v2, "cli-v2")):
            ec2_checks(c, cli, label)
            reservation_checks(c, cli, label)
            sqs_checks(c, cli, label)
            iam_eks_checks(c, cli, label)
        boto3_checks(c)
        control_checks(c)
        protocol_checks(c)
    finally:
        server.terminate()
        server.wait(timeout=10)
    failed = results.count(False)
    print(f"aws clients: {len(results) - failed} checks passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
