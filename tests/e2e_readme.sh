#!/usr/bin/env bash
# e2e_readme.sh: the README's results cannot go stale. Every row of its results table
# (parsed from README.md itself) is re-derived with the commands the README prints, as
# far as its last column says: seed 1's 100-episode figure and the env steps, or the
# min, median and max over seeds 1-5 as well, or, for a slow row, "none"; and the
# learning-curve SVGs it says are redrawn byte for byte are redrawn by running its own
# code blocks and compared with cmp. The table's check is also run on a copy of the
# README with one figure made stale, which it must reject. CALF_README_ALL_SEEDS=1
# re-derives seeds 1-5 of every row, the slow ones too (tens of minutes: not for CI).
. "$(dirname "$0")/lib_e2e.sh"

README=$SRC/README.md
# Under the sanitizers training runs several times slower and re-deriving the table
# takes over ctest's 600 s; the figures are the Release build's (same bits), and the
# sanitizer stage runs every other test that trains.
if ldd "$CALF" 2>/dev/null | grep -q libasan; then
    echo "skipped: $CALF is built with AddressSanitizer; the README's figures are re-derived by the Release build"
    exit 77
fi
if [ ! -f "$README" ] || [ ! -d "$SRC/examples" ]; then
    echo "skipped: no README.md or examples/ in $SRC"
    exit 77
fi
# The README's commands run as written, from a directory where build/calf is this binary
# and examples/ the source's.
BOX=$WORK/box
mkdir -p "$BOX/build" && ln -s "$CALF" "$BOX/build/calf" && ln -s "$SRC/examples" "$BOX/examples" || exit 1
cd "$BOX" || exit 1

# ---------------------------------------------------------------- the learning curves
# section TITLE: the README's "## TITLE" section, up to the next "## " heading
section() { awk -v t="## $1" '$0 == t { on = 1; next } on && /^## / { exit } on' "$README"; }
# sh_blocks: the ```sh code blocks of stdin, one after another
sh_blocks() { awk '/^```sh$/ { on = 1; next } on && /^```$/ { on = 0; next } on'; }

section "Learning curves" > "$WORK/curves.md"
section "Learning curves" | sh_blocks > "$WORK/curves.sh"
SVGS=$(grep -o -- '-o runs/[A-Za-z0-9_.-]*\.svg' "$WORK/curves.sh" | sed 's|^-o runs/||')
if [ "$(echo "$SVGS" | wc -w)" -ge 2 ]; then ok; else bad "no 'calf plot ... -o runs/X.svg' lines in the README's Learning curves"; fi
expect_in "$WORK/curves.md" "byte for byte"
if bash -e "$WORK/curves.sh" >"$WORK/curves.out" 2>&1; then ok; else
    bad "the README's learning-curve commands failed:"; tail -5 "$WORK/curves.out" >&2; fi
for svg in $SVGS; do
    expect_in "$WORK/curves.md" "(docs/$svg)"   # the picture shown is the one compared
    if cmp "runs/$svg" "$SRC/docs/$svg"; then ok; else
        bad "runs/$svg, redrawn by the README's commands, differs from docs/$svg"; fi
done

# ---------------------------------------------------------------- the results table
# The README's command for one seed of one example, with EXAMPLE and SEED in it:
TRAIN='build/calf train --root_dir runs/EXAMPLE-seedSEED --conf examples/EXAMPLE.gin --conf_param TrainerConfig.random_seed=SEED'
PLAY='build/calf play --root_dir runs/EXAMPLE-seedSEED --num_episodes 100 --seed 777'
section "Results" > "$WORK/results.md"
expect_in "$WORK/results.md" "$TRAIN"
expect_in "$WORK/results.md" "$PLAY"
HEADER='| example | seed 1 | min | median | max | env steps | re-derived by tests/e2e_readme.sh |'
expect_in "$WORK/results.md" "$HEADER"

# rows FILE: the table's rows as "EXAMPLE SEED1 MIN MEDIAN MAX STEPS WHICH", numbers
# without their thousands commas, WHICH "seed-1" or "seeds-1-5"
rows() {
    awk -v h="$HEADER" '$0 == h { on = 1; getline; next } on && !/^\|/ { exit } on' "$1" |
        awk -F'|' '{ ex = $2; gsub(/[ `]/, "", ex); sub(/^examples\//, "", ex); sub(/\.gin$/, "", ex)
                     w = $8; gsub(/^ +| +$/, "", w); gsub(/ /, "-", w)
                     out = ex
                     for (i = 3; i <= 7; i++) { v = $i; gsub(/[ ,]/, "", v); out = out " " (v == "" ? "-" : v) }
                     print out " " w }'
}
rows "$README" > "$WORK/rows"
if [ "$(wc -l < "$WORK/rows")" -ge 2 ]; then ok; else bad "only $(wc -l < "$WORK/rows") rows in the README's results table"; fi

# figure EXAMPLE SEED: that seed's 100-episode figure, to one decimal (trains it first
# unless the learning curves' commands already did)
figure() {
    local cmd
    if [ ! -d "runs/$1-seed$2/train/algorithm" ]; then
        cmd=${TRAIN//EXAMPLE/$1}; cmd=${cmd//SEED/$2}
        $cmd --quiet </dev/null >"$WORK/train.out" 2>&1 || { echo "$cmd failed:" >&2; tail -3 "$WORK/train.out" >&2; echo "?"; return; }
    fi
    cmd=${PLAY//EXAMPLE/$1}; cmd=${cmd//SEED/$2}
    $cmd </dev/null 2>"$WORK/play.err" | awk '/^average return over 100 episodes: / { printf "%.1f\n", $NF; n++ }
                                   END { if (!n) print "?" }'
}
# steps EXAMPLE: seed 1's env steps at its end
steps() {
    "$CALF" events --csv runs/"$1"-seed1/train/events.out.tfevents.* </dev/null |
        awk -F, '$1 == "Metrics/EnvironmentSteps" { v = $4 } END { printf "%d\n", v }'
}

# derive: each row's figures as this code makes them, in rows' format ("-" where the
# row's last column says they are not re-derived here)
while read -r ex s1 lo med hi st which; do
    if [ ! -f "examples/$ex.gin" ]; then bad "the results table names examples/$ex.gin, which is missing"; continue; fi
    case $which in
        seeds-1-5 | seed-1 | none) ;;
        *) bad "results table, $ex: the last column is '$which', not 'seeds 1-5', 'seed 1' or 'none'"; continue ;;
    esac
    if [ "$which" = none ] && [ "${CALF_README_ALL_SEEDS:-0}" != 1 ]; then echo "$ex - - - - - $which"; continue; fi
    f1=$(figure "$ex" 1)
    lo2=- med2=- hi2=-
    if [ "$which" = seeds-1-5 ] || [ "${CALF_README_ALL_SEEDS:-0}" = 1 ]; then
        for s in 2 3 4 5; do figure "$ex" "$s"; done > "$WORK/more"
        read -r lo2 med2 hi2 < <( (echo "$f1"; cat "$WORK/more") | sort -g |
            awk '{ v[NR] = $1 } END { print v[1], v[3], v[5] }')
    fi
    echo "$ex $f1 $lo2 $med2 $hi2 $(steps "$ex") $which"
    printf '  %s: seed 1 %s, seeds 1-5 %s %s %s, %s env steps\n' "$ex" "$f1" "$lo2" "$med2" "$hi2" "$(steps "$ex")" >&2
done < "$WORK/rows" > "$WORK/derived"

# stale ROWS: the rows of ROWS (a README's, parsed) whose figures differ from derived's
stale() {
    awk 'NR == FNR { d[$1] = $0; next }
         { split(d[$1], v, " "); bad = ($1 in d) ? "" : " (not derived)"
           names[2] = "seed 1"; names[3] = "min"; names[4] = "median"; names[5] = "max"; names[6] = "env steps"
           for (i = 2; i <= 6; i++) if (v[i] != "-" && v[i] != $i) bad = bad " " names[i] " " $i " (derived: " v[i] ")"
           if (bad != "") print $1 ":" bad }' "$WORK/derived" "$1"
}
stale "$WORK/rows" > "$WORK/stale"
if [ ! -s "$WORK/stale" ]; then ok; else bad "the README's results table is stale:"; cat "$WORK/stale" >&2; fi

# The same check on a README with one planted stale figure (the first row's seed 1,
# one off) must fail.
awk -v h="$HEADER" '$0 == h { print; getline; print; getline
                              n = split($0, c, "|"); c[3] = sprintf(" %.1f ", c[3] + (c[3] > 0 ? -1 : 1))
                              s = c[1]; for (i = 2; i <= n; i++) s = s "|" c[i]; print s; next } 1' \
    "$README" > "$WORK/README.stale"
rows "$WORK/README.stale" > "$WORK/rows.stale"
stale "$WORK/rows.stale" > "$WORK/stale.planted"
if [ -s "$WORK/stale.planted" ]; then ok; else bad "a planted stale figure in the results table went unnoticed"; fi

report e2e_readme
