"""metajit.distributed across two "hosts" (issue 44 part 5): two network namespaces joined by a veth pair stand in
for two machines, and mpirun launches the remote rank through a launch agent that enters the other namespace
instead of ssh. Open MPI's out-of-band and data traffic is kept to the veth's addresses, so the ranks can only
reach each other over TCP between the namespaces, as between hosts. Needs root with network administration
(CAP_NET_ADMIN); a machine that refuses makes these tests skip and say why."""
import os
import shutil
import subprocess
import sys
import uuid

import numpy as np
import pytest

PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed_programs")
SUBNET, ADDRESSES = "10.213.0.0/24", ("10.213.0.1", "10.213.0.2")


def run(*command):
    return subprocess.run(list(command), capture_output=True, text=True)


def link_bytes(namespace, device):
    """Bytes sent plus received on a namespace's link."""
    statistics = f"/sys/class/net/{device}/statistics"
    output = run("ip", "netns", "exec", namespace, "cat", f"{statistics}/tx_bytes", f"{statistics}/rx_bytes")
    return sum(int(value) for value in output.stdout.split())


@pytest.fixture
def two_hosts(tmp_path):
    if shutil.which("mpirun") is None or shutil.which("ip") is None:
        pytest.skip("mpirun or ip (iproute2) is missing")
    tag = uuid.uuid4().hex[:6]
    namespaces = (f"mj-{tag}-a", f"mj-{tag}-b")
    devices = (f"mj{tag}a", f"mj{tag}b")
    created = run("ip", "netns", "add", namespaces[0])
    if created.returncode != 0:
        pytest.skip(f"this machine refuses network namespaces ({created.stderr.strip()}): needs root with "
                    f"CAP_NET_ADMIN")
    try:
        commands = [["ip", "netns", "add", namespaces[1]],
                    ["ip", "link", "add", devices[0], "type", "veth", "peer", "name", devices[1]]]
        for index in range(2):
            commands += [["ip", "link", "set", devices[index], "netns", namespaces[index]],
                         ["ip", "-n", namespaces[index], "addr", "add", f"{ADDRESSES[index]}/24", "dev",
                          devices[index]],
                         ["ip", "-n", namespaces[index], "link", "set", devices[index], "up"],
                         ["ip", "-n", namespaces[index], "link", "set", "lo", "up"]]
        for command in commands:
            result = run(*command)
            assert result.returncode == 0, f"{' '.join(command)}: {result.stderr}"
        agent = tmp_path / "enter_host.sh"
        agent.write_text("#!/bin/sh\n# mpirun's stand-in for ssh: run the command in the namespace playing the host.\n"
                         "host=$1; shift\ncase \"$host\" in\n"
                         f"  {ADDRESSES[0]}) namespace={namespaces[0]} ;;\n"
                         f"  {ADDRESSES[1]}) namespace={namespaces[1]} ;;\n"
                         "  *) echo \"enter_host: unknown host $host\" >&2; exit 1 ;;\nesac\n"
                         "exec ip netns exec \"$namespace\" sh -c \"$*\"\n")
        agent.chmod(0o755)
        hostfile = tmp_path / "hosts"
        hostfile.write_text("".join(f"{address} slots=1\n" for address in ADDRESSES))
        yield namespaces, devices, agent, hostfile
    finally:
        for namespace in namespaces:
            run("ip", "netns", "del", namespace)  # takes the veth pair with it


def mpirun_on_two_hosts(two_hosts, program, *arguments):
    namespaces, _, agent, hostfile = two_hosts
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    command = ["ip", "netns", "exec", namespaces[0], "mpirun", "--hostfile", str(hostfile), "-np", "2",
               "--map-by", "node", "--mca", "plm_rsh_agent", str(agent), "--mca", "oob_tcp_if_include", SUBNET,
               "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", SUBNET,
               "-x", f"PYTHONPATH={os.pathsep.join(sys.path)}", sys.executable, os.path.join(PROGRAMS, program),
               *arguments]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    return result.returncode, result.stdout + result.stderr


def test_collectives_cross_between_two_hosts_over_tcp(two_hosts):
    namespaces, devices, _, _ = two_hosts
    before = link_bytes(namespaces[1], devices[1])
    status, output = mpirun_on_two_hosts(two_hosts, "two_hosts.py")
    assert status == 0, output[-3000:]
    places = dict(line.split(" in ") for line in output.splitlines() if line.startswith("rank "))
    assert set(places) == {"rank 0", "rank 1"} and places["rank 0"] != places["rank 1"], output[-3000:]
    # 4 MB each way for the all-reduce, over the veth between the "hosts".
    assert link_bytes(namespaces[1], devices[1]) - before > 4 << 20


def test_data_parallel_training_across_two_hosts_matches_one_process(two_hosts, tmp_path):
    one, two = tmp_path / "one.npz", tmp_path / "two.npz"
    program = os.path.join(PROGRAMS, "data_parallel_training.py")
    subprocess.run([sys.executable, program, "ddp", str(one)], check=True, timeout=300,
                   env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    status, output = mpirun_on_two_hosts(two_hosts, "data_parallel_training.py", "ddp", str(two))
    assert status == 0, output[-3000:]
    expected, actual = np.load(one), np.load(two)
    for name in expected.files:
        np.testing.assert_allclose(actual[name], expected[name], rtol=1e-6, atol=1e-6, err_msg=name)
