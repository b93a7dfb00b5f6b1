# lib_twohost.sh: two hosts simulated on one machine, for MPI jobs that cross a network
# (sourced by tests/e2e_twohost.sh and bench/twohost.sh, after lib_e2e.sh or with WORK set).
# Host A and host B are network namespaces, each with its own hostname (a UTS namespace
# per process tree), joined by a veth pair; Open MPI talks TCP over the veth only, and its
# rsh agent starts the remote daemon (orted) inside B. Needs root, iproute2 and unshare.
#
#   twohost_up || skip "$TWOHOST_WHY"   create the rig (names unique to this shell)
#   "$TWOHOST_MPIRUN" ARGS...           mpirun ARGS... on host A, slots A:1 and B:2
#   twohost_down                        kill what is left in the namespaces, remove them
#
# The names carry this shell's pid, so parallel runs never clash, and a rig whose shell
# died without cleaning up (SIGKILL) is removed by the next twohost_up.

TWOHOST_ID=$$
TWOHOST_NS_A=calfth-$TWOHOST_ID-a
TWOHOST_NS_B=calfth-$TWOHOST_ID-b
TWOHOST_HOST_A=calf-host-a-$TWOHOST_ID
TWOHOST_HOST_B=calf-host-b-$TWOHOST_ID
# Each namespace has its own addresses and routes, so every rig can use the same subnet.
TWOHOST_ADDR_A=10.213.0.1
TWOHOST_ADDR_B=10.213.0.2
TWOHOST_NET=10.213.0.0/30
TWOHOST_WHY=""
TWOHOST_IS_UP=0

# Remove the namespaces of rigs whose shell is gone (a test killed by ctest's timeout).
twohost_remove_stale() {
    local ns pid
    for ns in $(ip netns list 2>/dev/null | sed -n 's/^\(calfth-[0-9]*-[ab]\).*/\1/p'); do
        pid=${ns#calfth-}
        pid=${pid%-*}
        if ! kill -0 "$pid" 2>/dev/null; then
            ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
            ip netns del "$ns" 2>/dev/null
        fi
    done
}

# twohost_up: create the rig; returns non-zero with the reason in TWOHOST_WHY when this
# machine cannot (not root, no iproute2/unshare, namespaces not permitted).
twohost_up() {
    if [ "$(id -u)" != 0 ]; then TWOHOST_WHY="needs root (network namespaces)"; return 1; fi
    local tool
    for tool in ip unshare hostname; do
        if ! command -v $tool >/dev/null; then
            TWOHOST_WHY="'$tool' not found (Debian: apt-get install iproute2 util-linux)"
            return 1
        fi
    done
    twohost_remove_stale
    if ! ip netns add "$TWOHOST_NS_A" 2>"$WORK/twohost_err"; then
        TWOHOST_WHY="cannot create a network namespace: $(head -1 "$WORK/twohost_err")"
        return 1
    fi
    TWOHOST_IS_UP=1
    local va=cth${TWOHOST_ID}a vb=cth${TWOHOST_ID}b # interface names: 15 characters at most
    if ! { ip netns add "$TWOHOST_NS_B" &&
           ip link add "$va" type veth peer name "$vb" &&
           ip link set "$va" netns "$TWOHOST_NS_A" &&
           ip link set "$vb" netns "$TWOHOST_NS_B" &&
           ip -n "$TWOHOST_NS_A" addr add "$TWOHOST_ADDR_A/30" dev "$va" &&
           ip -n "$TWOHOST_NS_B" addr add "$TWOHOST_ADDR_B/30" dev "$vb" &&
           ip -n "$TWOHOST_NS_A" link set "$va" up && ip -n "$TWOHOST_NS_A" link set lo up &&
           ip -n "$TWOHOST_NS_B" link set "$vb" up && ip -n "$TWOHOST_NS_B" link set lo up
         } 2>"$WORK/twohost_err"; then
        TWOHOST_WHY="cannot set up the veth pair: $(head -1 "$WORK/twohost_err")"
        ip link del "$va" 2>/dev/null
        twohost_down
        return 1
    fi
    if ! unshare --uts true 2>"$WORK/twohost_err"; then
        TWOHOST_WHY="cannot create a UTS namespace: $(head -1 "$WORK/twohost_err")"
        twohost_down
        return 1
    fi
    # The rsh agent: Open MPI runs `agent HOST COMMAND` to start its daemon on HOST; here
    # that is a shell in B's namespaces instead of ssh.
    TWOHOST_AGENT=$WORK/twohost_rsh
    cat >"$TWOHOST_AGENT" <<EOF
#!/bin/sh
# rsh agent of the two-host rig: runs COMMAND on host B ($TWOHOST_ADDR_B) only
if [ "\$1" != "$TWOHOST_ADDR_B" ]; then echo "twohost_rsh: unknown host '\$1'" >&2; exit 255; fi
shift
exec ip netns exec $TWOHOST_NS_B unshare --uts sh -c 'hostname $TWOHOST_HOST_B && exec sh -c "\$1"' sh "\$*"
EOF
    chmod +x "$TWOHOST_AGENT"
    twohost_write_mpirun
    return 0
}

# "$TWOHOST_MPIRUN" ARGS...: mpirun ARGS... on host A (a script, so that timeout and
# signals reach mpirun itself), rank 0 there and the next two ranks on B. TCP over the
# veth only (no shared memory, no other interface); no binding to cores, since both
# simulated hosts number the same cores (bound, ranks on A and B would share core 0;
# TWOHOST_BIND=core does that, for comparison).
twohost_write_mpirun() {
    TWOHOST_MPIRUN=$WORK/twohost_mpirun
    cat >"$TWOHOST_MPIRUN" <<EOF
#!/bin/sh
# mpirun on host A of the two-host rig ($TWOHOST_NS_A, $TWOHOST_NS_B)
exec ip netns exec $TWOHOST_NS_A unshare --uts sh -c 'hostname $TWOHOST_HOST_A && exec "\$@"' sh \\
    mpirun --host $TWOHOST_ADDR_A:1,$TWOHOST_ADDR_B:2 --bind-to \${TWOHOST_BIND:-none} \\
    --mca plm_rsh_agent $TWOHOST_AGENT --mca btl tcp,self \\
    --mca btl_tcp_if_include $TWOHOST_NET --mca oob_tcp_if_include $TWOHOST_NET "\$@"
EOF
    chmod +x "$TWOHOST_MPIRUN"
}

# twohost_pids: the processes still running on either host (none once a job has ended)
twohost_pids() {
    ip netns pids "$TWOHOST_NS_A" 2>/dev/null
    ip netns pids "$TWOHOST_NS_B" 2>/dev/null
}

twohost_down() {
    [ "$TWOHOST_IS_UP" = 1 ] || return 0
    twohost_pids | xargs -r kill -9 2>/dev/null
    ip netns del "$TWOHOST_NS_A" 2>/dev/null # takes the veth pair with it
    ip netns del "$TWOHOST_NS_B" 2>/dev/null
    TWOHOST_IS_UP=0
}
