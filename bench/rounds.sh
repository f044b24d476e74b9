# shellcheck shell=sh
# shellcheck disable=SC2154 # me, bin, py, here, tmp, common, quiet_wait, rounds: the caller's
# rounds.sh — sourced by resnet152.sh and pareto.sh: runs a list of
# ResNet-152 training configurations, ours (bench_resnet) and PyTorch's
# (bench_resnet_torch.py), each in a process of its own, for $rounds
# rounds, every other round in reverse order, optionally waiting for quiet
# cores first, and says after each run how busy other processes kept the
# cores meanwhile. The caller sets me (its name, for messages), bin, py,
# here, tmp, common, quiet_wait and rounds; each run writes
# $tmp/NAME.ROUND.json (and .err).

# Busy and idle jiffies of the whole machine (/proc/stat).
jiffies() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6; exit }' /proc/stat; }

# Waits up to $quiet_wait seconds for 5 seconds in which the cores are
# less than 10 % busy.
wait_quiet() {
    waited=0
    while [ "$waited" -lt "$quiet_wait" ]; do
        # shellcheck disable=SC2046 # two numbers, split on purpose
        set -- $(jiffies)
        sleep 5
        waited=$((waited + 5))
        # shellcheck disable=SC2046
        set -- "$@" $(jiffies)
        if [ $(( ($3 - $1) * 10 < ($3 - $1) + ($4 - $2) )) -eq 1 ]; then
            return 0
        fi
    done
    [ "$quiet_wait" -eq 0 ] || echo "$me: still busy after ${quiet_wait}s; running" >&2
}

# run_one NAME KIND ARG ROUND: one process; a failure (a budget that does
# not fit) is recorded, not fatal.
run_one() {
    wait_quiet
    echo "$me: round $4: $2 $3" >&2
    # shellcheck disable=SC2086
    if [ "$2" = ours ]; then
        "$bin" --model resnet152 --schedule "$3" $common > "$tmp/$1.$4.json" \
            2> "$tmp/$1.$4.err" || cat "$tmp/$1.$4.err" >&2
    else
        "$py" "$here/bench_resnet_torch.py" --depth 152 --mode "$3" $common \
            > "$tmp/$1.$4.json" 2> "$tmp/$1.$4.err" || cat "$tmp/$1.$4.err" >&2
    fi
    "$py" -c 'import json, sys
try:
    r = json.load(open(sys.argv[1]))
    print("%s: round %s: %s %s: %.3f s/step, other processes used %.0f %% of the cores"
          % (sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], r["s_per_step"],
             r["foreign_cpu_pct"]))
except (OSError, ValueError, KeyError):
    pass' "$tmp/$1.$4.json" "$me" "$4" "$2" "$3" >&2
}

# run_rounds "NAME:KIND:ARG ...": every configuration, $rounds times.
run_rounds() {
    reversed=$(echo "$1" | tr ' ' '\n' | awk '{ l[NR] = $0 } END { for (i = NR; i > 0; i--) print l[i] }')
    r=1
    while [ "$r" -le "$rounds" ]; do
        if [ $((r % 2)) -eq 1 ]; then order=$1; else order=$reversed; fi
        for item in $order; do
            rest=${item#*:}
            run_one "${item%%:*}" "${rest%%:*}" "${rest#*:}" "$r"
        done
        r=$((r + 1))
    done
}
