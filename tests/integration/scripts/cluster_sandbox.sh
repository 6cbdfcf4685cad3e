#!/usr/bin/env bash
# A Slurm cluster of NODES nodes (node1, node2, ...) and an Open MPI launch agent, inside the
# namespaces the cluster tests start it in: run as PID 1 of
#   unshare --pid --fork --kill-child --mount-proc --mount --net --uts cluster_sandbox.sh DIR NODES
# node1 is this network namespace (munged, slurmctld, its slurmd, srun and mpirun run here); every
# other node is a network and UTS namespace of its own, joined to node1's by a bridge
# (10.77.0.0/24), so each node has its own host name, address and ports, as on a real cluster.
# Host names resolve through an /etc/hosts bind-mounted in this mount namespace only. Everything
# lives in DIR; when this process ends the kernel kills every process of its PID namespace, so
# nothing outlives the test. DIR/ready holds "ok" once every node is idle, or the reason it is not.
set -uo pipefail

dir=$1
nodes=$2
# The test's own engine variables (a CI job under Slurm) describe another cluster.
for v in $(env | grep -oE '^(SLURM|OMPI|PMIX|PMI)_[A-Za-z0-9_]*'); do unset "$v"; done
# Private temporary and runtime directories: a partrain launcher removes the files of launchers
# whose pid is gone, and from inside this PID namespace every outside pid looks gone.
mkdir -p "$dir/tmp" "$dir/run"
export TMPDIR="$dir/tmp" XDG_RUNTIME_DIR="$dir/run"
fail() {
  echo "$*" >"$dir/ready.tmp" && mv "$dir/ready.tmp" "$dir/ready"
  exec sleep infinity
}

# -- network: node1 here, the others behind veth pairs on a bridge ------------------------------
ip link set lo up || fail "ip link: cannot bring up the loopback (no CAP_NET_ADMIN?)"
hostname node1
ip link add br0 type bridge || fail "ip link add br0 type bridge failed"
ip addr add 10.77.0.1/24 dev br0
ip link set br0 up
hosts="127.0.0.1 localhost"$'\n'"10.77.0.1 node1"
for n in $(seq 2 "$nodes"); do
  # A holder process owns the node's namespaces; commands enter them with nsenter.
  unshare --net --uts sh -c "hostname node$n; exec sleep infinity" &
  holder=$!
  echo "$holder" >"$dir/node$n.pid"
  for _ in $(seq 50); do [ "$(readlink /proc/$holder/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break; sleep 0.02; done
  ip link add "veth$n" type veth peer name "eth$n" || fail "ip link add veth failed"
  ip link set "eth$n" netns "$holder"
  ip link set "veth$n" master br0
  ip link set "veth$n" up
  nsenter -t "$holder" -n sh -c "ip link set lo up; ip addr add 10.77.0.$n/24 dev eth$n; ip link set eth$n up"
  hosts+=$'\n'"10.77.0.$n node$n"
done
echo "$hosts" >"$dir/hosts"
mount --bind "$dir/hosts" /etc/hosts || fail "mount --bind of /etc/hosts failed"
echo $$ >"$dir/node1.pid"

# -- munge: Slurm's authentication, with its own key and socket ----------------------------------
mkdir -p "$dir/munge" "$dir/ctld" "$dir/spool"
chmod 700 "$dir/munge"
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/munge.key"
munged --force --foreground --socket="$dir/munge/socket" --key-file="$dir/munge/munge.key" \
  --pid-file="$dir/munge/pid" --log-file="$dir/munge/log" --seed-file="$dir/munge/seed" &
for _ in $(seq 100); do [ -S "$dir/munge/socket" ] && break; sleep 0.05; done
[ -S "$dir/munge/socket" ] || fail "munged did not start: $(tail -3 "$dir/munge/log" 2>/dev/null)"

# -- Slurm ------------------------------------------------------------------------------------------
cat >"$dir/slurm.conf" <<CONF
ClusterName=partrain
SlurmctldHost=node1(10.77.0.1)
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
AuthInfo=socket=$dir/munge/socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
NodeName=node[1-$nodes] NodeAddr=10.77.0.[1-$nodes] CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
export SLURM_CONF="$dir/slurm.conf"
slurmctld -D -c -f "$SLURM_CONF" &
slurmd -D -f "$SLURM_CONF" -N node1 &
for n in $(seq 2 "$nodes"); do
  nsenter -t "$(cat "$dir/node$n.pid")" -n -u slurmd -D -f "$SLURM_CONF" -N "node$n" &
done
for _ in $(seq 300); do
  idle=$(sinfo -h -N -o '%T' 2>/dev/null | grep -c '^idle')
  [ "$idle" = "$nodes" ] && break
  sleep 0.1
done
[ "$idle" = "$nodes" ] ||
  fail "Slurm nodes not idle after 30 s: $(sinfo -h -N 2>&1 | tr '\n' ' '); slurmctld: $(tail -3 "$dir/slurmctld.log" 2>/dev/null | tr '\n' ' ')"

# -- Open MPI's remote-shell agent: "HOST COMMAND..." run in HOST's namespaces ---------------------
cat >"$dir/mpi-agent" <<AGENT
#!/bin/sh
host=\$1; shift
if [ "\$host" = node1 ]; then exec sh -c "\$*"; fi
exec nsenter -t "\$(cat "$dir/\$host.pid")" -n -u sh -c "\$*"
AGENT
chmod +x "$dir/mpi-agent"

echo ok >"$dir/ready.tmp" && mv "$dir/ready.tmp" "$dir/ready"
while :; do wait; sleep 1; done
