"""Calls Kairship's gRPC API with the Python grpcio client, using server reflection to
build the message classes (no generated stubs). Usage: grpc_client.py HOST:PORT INSTANCE
"""
import sys

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

checks = 0


def check(cond, what):
    global checks
    if not cond:
        print(f"FAILED: {what}")
        sys.exit(1)
    checks += 1


def main(addr, instance):
    channel = grpc.insecure_channel(addr)
    grpc.channel_ready_future(channel).result(timeout=10)
    db = ProtoReflectionDescriptorDatabase(channel)
    services = list(db.get_services())
    for svc in ["InstanceService", "ClusterService", "WorkloadService", "PolicyService", "SupervisorService"]:
        check(f"kairship.v1alpha1.{svc}" in services, f"{svc} listed by reflection: {services}")
    pool = DescriptorPool(db)

    def method(full_name):
        m = pool.FindMethodByName(full_name)
        req = message_factory.GetMessageClass(m.input_type)
        resp = message_factory.GetMessageClass(m.output_type)
        call = channel.unary_unary(
            f"/{m.containing_service.full_name}/{m.name}",
            request_serializer=req.SerializeToString,
            response_deserializer=resp.FromString,
        )
        return req, call

    Req, list_instances = method("kairship.v1alpha1.InstanceService.ListInstances")
    names = [i.metadata.name for i in list_instances(Req(), timeout=10).instances]
    check(instance in names, f"{instance} in {names}")

    Req, stats = method("kairship.v1alpha1.InstanceService.GetInstanceStats")
    s = stats(Req(name=instance), timeout=10)
    check(s.clusters_total == 2 and s.clusters_ready == 2, f"stats: {s}")
    try:
        stats(Req(name="nope"), timeout=10)
        check(False, "unknown instance must fail")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.NOT_FOUND, f"NOT_FOUND, got {e.code()}")
    try:
        stats(Req(name="Bad_Name"), timeout=10)
        check(False, "invalid name must fail")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and "name" in e.details(), f"INVALID_ARGUMENT naming the field, got {e.code()} {e.details()}")

    Req, list_clusters = method("kairship.v1alpha1.ClusterService.ListClusters")
    clusters = list_clusters(Req(instance=instance), timeout=10).clusters
    check(sorted(c.metadata.name for c in clusters) == ["member1", "member2"], f"clusters {clusters}")

    Req, list_workloads = method("kairship.v1alpha1.WorkloadService.ListWorkloads")
    list_workloads(Req(instance=instance), timeout=10)

    Req, list_policies = method("kairship.v1alpha1.PolicyService.ListPolicies")
    list_policies(Req(instance=instance), timeout=10)

    Req, actors = method("kairship.v1alpha1.SupervisorService.ListActors")
    names = [a.name for a in actors(Req(), timeout=10).actors]
    check(f"instance/{instance}" in names, f"actors {names}")

    health = health_pb2_grpc.HealthStub(channel)
    status = health.Check(health_pb2.HealthCheckRequest(service="kairship.v1alpha1.InstanceService"), timeout=10).status
    check(status == health_pb2.HealthCheckResponse.SERVING, f"health {status}")
    print(f"python grpc client: all checks passed ({checks})")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
