#!/usr/bin/env bash
# e2e_plot.sh: `calf plot` on two real runs (ppo_cartpole, 6 iterations, seeds 1 and 2):
# the SVG parses as XML (libxml2's xmllint), and its polylines are the scalars `calf
# events --csv` prints, placed as each panel's <desc> says (raw, smoothed with
# TensorBoard's formula, grouped by seed, on iterations); a resumed run; the same
# events give the same bytes; bad input is one line and exit 2, with no file left.
. "$(dirname "$0")/lib_e2e.sh"

if [ ! -f "$SRC/examples/ppo_cartpole.gin" ]; then
    echo "skipped: $SRC/examples/ppo_cartpole.gin is missing"
    exit 77
fi
HAVE_XMLLINT=1
if ! command -v xmllint >/dev/null; then
    HAVE_XMLLINT=0
    echo "skipped, the SVG's XML checks: no xmllint here (Debian: apt-get install libxml2-utils)"
fi

R1=$WORK/ppo-seed1
R2=$WORK/ppo-seed2
for s in 1 2; do
    expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/ppo-seed$s" --conf "$SRC/examples/ppo_cartpole.gin" \
        --conf_param TrainerConfig.num_iterations=6 --conf_param TrainerConfig.random_seed=$s \
        --conf_param create_environment.num_parallel_environments=64
done
csv() { "$CALF" events --csv "$1"/"$2"/events.out.tfevents.*; }
csv "$R1" train > "$WORK/r1_train.csv" && csv "$R1" eval > "$WORK/r1_eval.csv" &&
    csv "$R2" train > "$WORK/r2_train.csv" && csv "$R2" eval > "$WORK/r2_eval.csv" && ok ||
    bad "calf events --csv"

# ---------------------------------------------------------------- the expected points
# desc_numbers DESC: "x [XLO, XHI] to [PX0, PX1]; y [YLO, YHI] to [PY0, PY1]" as 8 numbers
desc_numbers() { printf '%s\n' "$1" | sed 's/[^-0-9.e+]\{1,\}/ /g; s/^ *//'; }
# expected CSV TAG DESC W [XMODE]: the raw points, then (a second line) the smoothed
# ones, "px,py ...": a TAG row at step s goes to x = the Metrics/EnvironmentSteps value
# of step s (XMODE steps) or s (XMODE iterations), y = its value, then
#   px = PX0 + (x - XLO) / (XHI - XLO) (PX1 - PX0), py = PY0 + (y - YLO) / (YHI - YLO) (PY1 - PY0)
# and the smoothed y is TensorBoard's debiased EMA (a constant series unchanged).
expected() {
    awk -F, -v tag="$2" -v d="$(desc_numbers "$3")" -v w="$4" -v xmode="${5:-steps}" '
        $1 == tag { n++; step[n] = $2; val[n] = $4 }
        $1 == "Metrics/EnvironmentSteps" { env[$2] = $4 }
        END {
            split(d, m, " ")
            constant = 1
            for (i = 2; i <= n; i++) if (val[i] != val[1]) constant = 0
            last = 0
            for (i = 1; i <= n; i++) {
                x = xmode == "steps" ? env[step[i]] : step[i]
                px[i] = m[3] + (x - m[1]) / (m[2] - m[1]) * (m[4] - m[3])
                last = last * w + (1 - w) * val[i]
                s = constant ? val[i] : last / (1 - w ^ i)
                py[i] = m[7] + (val[i] - m[5]) / (m[6] - m[5]) * (m[8] - m[7])
                sy[i] = m[7] + (s - m[5]) / (m[6] - m[5]) * (m[8] - m[7])
            }
            for (i = 1; i <= n; i++) printf "%s%.6f,%.6f", (i > 1 ? " " : ""), px[i], py[i]
            printf "\n"
            for (i = 1; i <= n; i++) printf "%s%.6f,%.6f", (i > 1 ? " " : ""), px[i], sy[i]
            printf "\n"
        }' "$1"
}
# same_points GOT WANT WHAT: the same number of points, each within the "%.2f" rounding
same_points() {
    local verdict
    verdict=$(awk -v got="$1" -v want="$2" 'BEGIN {
        n = split(got, g, /[ ,]/); k = split(want, e, /[ ,]/)
        if (n != k || n < 2) { printf "%d numbers, want %d", n, k; exit }
        for (i = 1; i <= n; i++) {
            diff = g[i] - e[i]; if (diff < 0) diff = -diff
            if (diff > 0.0051) { printf "number %d: %s, want %s", i, g[i], e[i]; exit }
        }
        printf "ok" }')
    if [ "$verdict" = ok ]; then ok; else bad "$3: $verdict"; fi
}
xq() { xmllint --xpath "$2" "$1" 2>/dev/null; }
panel() { echo "//*[local-name()='g'][@class='panel'][*[local-name()='title']='$1']"; }
line() { echo "$(panel "$1")/*[local-name()='g'][@class='run'][*[local-name()='title']='$2']"; }
# check_line SVG PANEL RUN_TITLE CSV TAG [XMODE]: raw and smoothed polylines of the run
check_line() {
    local desc want
    desc=$(xq "$1" "string($(panel "$2")/*[local-name()='desc'])")
    if [ -z "$desc" ]; then bad "$1: no panel '$2'"; return; fi
    want=$(expected "$4" "$5" "$desc" 0.6 "${6:-steps}")
    same_points "$(xq "$1" "string($(line "$2" "$3")/*[local-name()='polyline'][@class='raw']/@points)")" \
        "$(sed -n 1p <<<"$want")" "$2 $3 raw"
    same_points "$(xq "$1" "string($(line "$2" "$3")/*[local-name()='polyline'][@class='smoothed']/@points)")" \
        "$(sed -n 2p <<<"$want")" "$2 $3 smoothed"
}

# ---------------------------------------------------------------- two runs
SVG=$WORK/plot.svg
expect_exit 0 "$CALF" plot "$R1" "$R2" -o "$SVG"
expect_eq "$(cat "$WORK/err")" "" "stderr of a plot"
if [ -s "$SVG" ]; then ok; else bad "no $SVG"; fi
expect_eq "$(head -c 37 "$SVG")" '<?xml version="1.0" encoding="UTF-8" ' "XML declaration"
if [ $HAVE_XMLLINT = 1 ]; then
    expect_exit 0 xmllint --noout "$SVG"
    expect_eq "$(xq "$SVG" "string(/*/@version)")" "1.1" "SVG version"
    expect_eq "$(xq "$SVG" "count(/*[local-name()='svg']/*[local-name()='g'][@class='panel'])")" 2 "panels"
    expect_eq "$(xq "$SVG" "string((//*[local-name()='g'][@class='panel'])[1]/*[local-name()='title'])")" \
        "eval:Metrics/AverageReturn" "eval's panel first"
    expect_eq "$(xq "$SVG" "count(//*[local-name()='g'][@class='entry'])")" 2 "legend entries"
    for r in ppo-seed1 ppo-seed2; do
        expect_eq "$(xq "$SVG" "count(//*[local-name()='g'][@class='entry'][*[local-name()='text']='$r'])")" 1 "legend: $r"
    done
    check_line "$SVG" train:Metrics/AverageReturn ppo-seed1 "$WORK/r1_train.csv" Metrics/AverageReturn
    check_line "$SVG" train:Metrics/AverageReturn ppo-seed2 "$WORK/r2_train.csv" Metrics/AverageReturn
    # eval: one value (iteration 6) per run
    check_line "$SVG" eval:Metrics/AverageReturn ppo-seed1 "$WORK/r1_eval.csv" Metrics/AverageReturn
    check_line "$SVG" eval:Metrics/AverageReturn ppo-seed2 "$WORK/r2_eval.csv" Metrics/AverageReturn
    expect_eq "$(xq "$SVG" "string($(panel train:Metrics/AverageReturn)/*[local-name()='desc'])" | sed 's/;.*//')" \
        "x [0, 12288] to [554, 954]" "x: env steps from 0 to the last (6 x 2048), second column"
    expect_eq "$(xq "$SVG" "string($(panel train:Metrics/AverageReturn)/*[local-name()='text'][@class='xlabel'])")" \
        "environment steps" "x axis title"
fi
# the same events, the same bytes
expect_exit 0 "$CALF" plot "$R1" "$R2" -o "$WORK/again.svg"
expect_same_file "$SVG" "$WORK/again.svg"
expect_exit 0 "$CALF" plot "$R1" "$R2" -o -
cmp -s "$WORK/out" "$SVG" && ok || bad "-o - differs from the file"

# ---------------------------------------------------------------- options
if [ $HAVE_XMLLINT = 1 ]; then
    # the tag against env steps, no smoothing, iterations
    expect_exit 0 "$CALF" plot "$R1" --tag train:Metrics_vs_EnvironmentSteps/AverageReturn \
        --tag eval:Metrics/AverageReturn --smooth 0 -o "$WORK/vs.svg"
    expect_exit 0 xmllint --noout "$WORK/vs.svg"
    T=train:Metrics_vs_EnvironmentSteps/AverageReturn
    expect_eq "$(xq "$WORK/vs.svg" "string($(line $T ppo-seed1)/*[local-name()='polyline'][@class='raw']/@points)")" \
        "$(xq "$WORK/vs.svg" "string($(line $T ppo-seed1)/*[local-name()='polyline'][@class='smoothed']/@points)")" \
        "--smooth 0: the smoothed line is the raw one"
    D=$(xq "$WORK/vs.svg" "string($(panel $T)/*[local-name()='desc'])")
    same_points "$(xq "$WORK/vs.svg" "string($(line $T ppo-seed1)/*[local-name()='polyline'][@class='raw']/@points)")" \
        "$(expected "$WORK/r1_train.csv" Metrics/AverageReturn "$D" 0 | sed -n 1p)" \
        "Metrics_vs_EnvironmentSteps at its own step = Metrics/ through EnvironmentSteps"
    expect_exit 0 "$CALF" plot "$R1" "$R2" --x iterations --tag train:Metrics/AverageEpisodeLength -o "$WORK/it.svg"
    expect_exit 0 xmllint --noout "$WORK/it.svg"
    check_line "$WORK/it.svg" train:Metrics/AverageEpisodeLength ppo-seed2 "$WORK/r2_train.csv" \
        Metrics/AverageEpisodeLength iterations
    expect_eq "$(xq "$WORK/it.svg" "string($(panel train:Metrics/AverageEpisodeLength)/*[local-name()='desc'])" | sed 's/;.*//')" \
        "x [0, 6] to [74, 474]" "x: iterations"
    expect_exit 0 "$CALF" plot "$R1" --x seconds -o "$WORK/sec.svg"
    expect_exit 0 xmllint --noout "$WORK/sec.svg"
    expect_in "$WORK/sec.svg" ">seconds since the run&apos;s first record</text>"

    # --group: one line, the mean of the seeds at each step, over their min-max band
    expect_exit 0 "$CALF" plot "$R1" "$R2" --group -o "$WORK/group.svg"
    expect_exit 0 xmllint --noout "$WORK/group.svg"
    G="ppo (2 runs: mean, min to max)"
    expect_eq "$(xq "$WORK/group.svg" "count(//*[local-name()='g'][@class='run'])")" 2 "one line per panel"
    expect_eq "$(xq "$WORK/group.svg" "count($(line train:Metrics/AverageReturn "$G")/*[local-name()='polygon'][@class='band'])")" \
        1 "the band"
    # the mean of the two runs' CSV rows, step by step (same env steps in both)
    awk -F, 'FNR == 1 { f++ } $1 == "Metrics/AverageReturn" { v[f, $2] = $4; s[$2] = 1 }
             $1 == "Metrics/EnvironmentSteps" { e[$2] = $4 }
             END { for (k in s) if ((1, k) in v && (2, k) in v)
                       printf "Metrics/AverageReturn,%s,0,%.17g\nMetrics/EnvironmentSteps,%s,0,%s\n",
                              k, (v[1, k] + v[2, k]) / 2, k, e[k] }' \
        "$WORK/r1_train.csv" "$WORK/r2_train.csv" | sort -t, -k2,2n > "$WORK/mean.csv"
    check_line "$WORK/group.svg" train:Metrics/AverageReturn "$G" "$WORK/mean.csv" Metrics/AverageReturn
fi

# ---------------------------------------------------------------- a resumed run
# 3 iterations, then resumed to 6: all 6 points either way (a resume writes no restart
# marker, which would drop the first launch's Metrics_vs_EnvironmentSteps/ values;
# e2e_train covers a resume after a crash)
R3=$WORK/resumed
expect_exit 0 "$CALF" train --quiet --root_dir "$R3" --conf "$SRC/examples/ppo_cartpole.gin" \
    --conf_param TrainerConfig.num_iterations=3
expect_exit 0 "$CALF" train --quiet --root_dir "$R3" --conf "$SRC/examples/ppo_cartpole.gin" \
    --conf_param TrainerConfig.num_iterations=6
if [ $HAVE_XMLLINT = 1 ]; then
    expect_exit 0 "$CALF" plot "$R3" --tag train:Metrics/AverageReturn \
        --tag train:Metrics_vs_EnvironmentSteps/AverageReturn -o "$WORK/resumed.svg"
    expect_exit 0 xmllint --noout "$WORK/resumed.svg"
    npoints() { xq "$WORK/resumed.svg" "string($(line "$1" resumed)/*[local-name()='polyline'][@class='raw']/@points)" | wc -w; }
    expect_eq "$(npoints train:Metrics/AverageReturn)" 6 "points of Metrics/AverageReturn after a resume"
    expect_eq "$(npoints train:Metrics_vs_EnvironmentSteps/AverageReturn)" 6 \
        "points of Metrics_vs_EnvironmentSteps/AverageReturn after a resume"
    # and the 6 are the run as `calf events` shows it, the same as an unbroken run's
    "$CALF" events --csv "$R3"/train/events.out.tfevents.* > "$WORK/r3.csv"
    check_line "$WORK/resumed.svg" train:Metrics/AverageReturn resumed "$WORK/r3.csv" Metrics/AverageReturn
fi

# ---------------------------------------------------------------- usage and errors
expect_exit 0 "$CALF" plot --help
for t in "calf plot ROOT... [-o FILE.svg] [--tag T]... [--smooth W]" "--x steps|iterations|seconds" \
         "--group" "eval:T or train:T" "default 0.6"; do
    expect_in "$WORK/out" "$t"
done
expect_exit 0 "$CALF" --help
expect_in "$WORK/out" "calf plot ROOT... [-o FILE.svg]"
# one_line_error WANT ARGS...: exit 2, one line on stderr holding WANT, no plot left
one_line_error() {
    local want=$1
    shift
    rm -f "$WORK/bad.svg"
    expect_exit 2 "$CALF" plot -o "$WORK/bad.svg" "$@"
    expect_eq "$(wc -l < "$WORK/err" | tr -d ' ')" 1 "one line for: $*"
    expect_in "$WORK/err" "$want"
    if [ -e "$WORK/bad.svg" ] || ls "$WORK"/bad.svg.tmp.* >/dev/null 2>&1; then
        bad "a file left by: $*"
    else ok; fi
}
one_line_error "no ROOT given"
one_line_error "no run has the scalar tag 'Nope' in eval/ or train/" "$R1" --tag Nope
one_line_error "no run has the scalar tag 'Nope' in train/" "$R1" --tag eval:Metrics/AverageReturn --tag train:Nope
mkdir -p "$WORK/empty/train"
one_line_error "$WORK/empty: no events file in $WORK/empty/train or $WORK/empty/eval" "$R1" "$WORK/empty"
one_line_error "$WORK/missing: No such file or directory" "$WORK/missing"
one_line_error "--smooth expects a number in [0, 1), got '1'" "$R1" --smooth 1
one_line_error "--smooth expects a number in [0, 1), got '0.5x'" "$R1" --smooth 0.5x
one_line_error "--x expects steps, iterations or seconds, got 'time'" "$R1" --x time
one_line_error "unknown option '--bogus'" "$R1" --bogus
one_line_error "option --tag needs a value" "$R1" --tag
one_line_error "against environment steps" "$R1" --x iterations --tag Metrics_vs_EnvironmentSteps/AverageReturn
# a damaged events file is the reader's error, naming the file
cp -r "$R1" "$WORK/damaged"
EV=$(ls "$WORK"/damaged/train/events.out.tfevents.* | head -1)
printf '\xff' | dd of="$EV" bs=1 seek=30 conv=notrunc status=none
one_line_error "CRC mismatch" "$WORK/damaged"
# an existing plot is left alone when a new one fails
cp "$SVG" "$WORK/keep.svg"
expect_exit 2 "$CALF" plot "$R1" --tag Nope -o "$WORK/keep.svg"
expect_same_file "$SVG" "$WORK/keep.svg"
expect_write_fails "calf plot: standard output: writing the SVG: No space left on device" \
    "$CALF" plot "$R1" -o -
# an output in a directory that does not exist: exit 1 naming the file asked for
expect_exit 1 "$CALF" plot "$R1" -o "$WORK/nodir/p.svg"
expect_in "$WORK/err" "calf plot: $WORK/nodir/p.svg: cannot create: No such file or directory"

# a full disk (a file size limit, its signal ignored: writes fail with EFBIG): exit 1,
# one line naming the file and the errno, no file left behind
( trap '' XFSZ; ulimit -f 1; exec "$CALF" plot "$R1" -o "$WORK/full.svg" ) > "$WORK/out" 2> "$WORK/err"
expect_eq "$? $(cat "$WORK/err")" "1 calf plot: $WORK/full.svg: writing the SVG: File too large" "a full disk"
expect_eq "$(ls "$WORK" | grep -c '^full\.svg')" 0 "no file left by a failed write"

report e2e_plot
