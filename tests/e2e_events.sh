#!/usr/bin/env bash
# e2e_events.sh: `calf events` on files built here record by record (TFRecord framing
# and CRC32C computed in the shell from their definitions) and on a real run's files:
# restart markers and what they drop, --raw, --csv, a crash-cut tail (a warning, exit
# 0) against damage in the middle (exit 2).
. "$(dirname "$0")/lib_e2e.sh"

if [ ! -f "$SRC/examples/ppo_cartpole.gin" ]; then
    echo "skipped: $SRC/examples/ppo_cartpole.gin is missing"
    exit 77
fi
if ! command -v od >/dev/null; then echo "skipped: no od to hex-encode tags"; exit 77; fi

# ---------------------------------------------------------------- building records
# CRC-32C bit by bit (polynomial 0x82F63B78 reflected), of the bytes given as hex
crc32c_hex() {
    local hex=$1 crc=$((0xffffffff)) i k
    for ((i = 0; i < ${#hex}; i += 2)); do
        crc=$((crc ^ 16#${hex:i:2}))
        for ((k = 0; k < 8; k++)); do
            if ((crc & 1)); then crc=$(((crc >> 1) ^ 0x82F63B78)); else crc=$((crc >> 1)); fi
        done
    done
    echo $((crc ^ 0xffffffff))
}
mask() { echo $(((((($1 >> 15) | ($1 << 17)) & 0xffffffff) + 0xa282ead8) & 0xffffffff)); }
le_hex() { # VALUE NBYTES: little-endian hex
    local out='' i
    for ((i = 0; i < $2; i++)); do out+=$(printf '%02x' $((($1 >> (8 * i)) & 255))); done
    echo "$out"
}
str_hex() { printf '%s' "$1" | od -An -v -tx1 | tr -d ' \n'; }
# a TFRecord: length, masked CRC of the length, data, masked CRC of the data
record() {
    local len
    len=$(le_hex $((${#1} / 2)) 8)
    echo "$len$(le_hex "$(mask "$(crc32c_hex "$len")")" 4)$1$(le_hex "$(mask "$(crc32c_hex "$1")")" 4)"
}
unhex() { # HEX: the bytes, on stdout
    local i fmt=''
    for ((i = 0; i < ${#1}; i += 2)); do fmt+="\\x${1:i:2}"; done
    printf "$fmt"
}
# Event fields (event.proto): wall_time 1 (double), step 2 (varint), file_version 3,
# summary 5 {value 1 {tag 1, simple_value 2 (float)}}, session_log 7 {status 1, START 1}.
# Steps here are below 128 (one varint byte).
ev_version() { echo "1a0d$(str_hex brain.Event:2)"; }
ev_scalar() { # STEP TAG FLOAT_LE_HEX [WALL_TIME_LE_HEX]
    local tag val sum
    tag=$(str_hex "$2")
    val="0a$(printf %02x ${#2})${tag}15$3"
    sum="0a$(printf %02x $((${#val} / 2)))$val"
    echo "${4:+09$4}10$(printf %02x "$1")2a$(printf %02x $((${#sum} / 2)))$sum"
}
ev_start() { echo "10$(printf %02x "$1")3a020801"; }

F1=0000803f F2=00000040 F3=00004040 FHALF=0000003f FQUARTER=0000803e F15=0000c03f
W0=00002040fc54d941 # 1700000000.5
W1=00005040fc54d941 # 1700000001.25

# One file, two launches: the first got to step 3, the second resumed at step 2.
RECS=("$(ev_version)" "$(ev_start 0)" "$(ev_scalar 1 loss $F1 $W0)" "$(ev_scalar 1 'a,b' $F15 $W0)"
      "$(ev_scalar 2 loss $F2 $W1)" "$(ev_scalar 3 loss $F3)" "$(ev_start 2)"
      "$(ev_scalar 2 loss $FHALF $W1)" "$(ev_scalar 3 loss $FQUARTER)")
RUN=$WORK/run.tfevents
OFFS=() # byte offset of each record
off=0
: > "$RUN"
for r in "${RECS[@]}"; do
    OFFS+=("$off")
    unhex "$(record "$r")" >> "$RUN"
    off=$((off + ${#r} / 2 + 16))
done
SIZE=$off
expect_eq "$(wc -c < "$RUN" | tr -d ' ')" "$SIZE" "size of the built file"

VIEW='file_version brain.Event:2
0 session_start
1 loss 1
1 a,b 1.5
2 session_start
2 loss 0.5
3 loss 0.25'
RAW='file_version brain.Event:2
0 session_start
1 loss 1
1 a,b 1.5
2 loss 2
3 loss 3
2 session_start
2 loss 0.5
3 loss 0.25'

# ---------------------------------------------------------------- the views
expect_exit 0 "$CALF" events "$RUN"
expect_eq "$(cat "$WORK/out")" "$VIEW" "default view (steps >= 2 before the marker dropped)"
expect_eq "$(cat "$WORK/err")" "" "stderr of a clean file"
expect_exit 0 "$CALF" events --raw "$RUN"
expect_eq "$(cat "$WORK/out")" "$RAW" "--raw"
expect_exit 0 "$CALF" events "$RUN" --csv
expect_eq "$(cat "$WORK/out")" 'tag,step,wall_time,value
loss,1,1700000000.5,1
"a,b",1,1700000000.5,1.5
loss,2,1700000001.25,0.5
loss,3,0,0.25' "--csv"
expect_exit 0 "$CALF" events --csv --raw "$RUN"
expect_eq "$(sed -n '4,5p' "$WORK/out" | tr '\n' ' ')" "loss,2,1700000001.25,2 loss,3,0,3 " "--csv --raw"
expect_eq "$(wc -l < "$WORK/out" | tr -d ' ')" 7 "--csv --raw rows"

# the CSV read back field by field with the shell alone
sum=0
rows=0
while IFS=, read -r tag step wall value; do
    case $tag in \"*) continue ;; esac # the quoted tag holds a comma: skip it here
    [ "$tag" = tag ] && continue
    rows=$((rows + 1))
    sum=$((sum + step))
    case $wall in *[!0-9.]*) bad "wall_time '$wall' is not a plain decimal" ;; *) ok ;; esac
    case $value in 1|0.5|0.25) ok ;; *) bad "value '$value'" ;; esac
done < <("$CALF" events --csv "$RUN")
expect_eq "$rows $sum" "3 6" "CSV rows and their steps"

# ---------------------------------------------------------------- a crash-cut tail
LAST=${OFFS[8]}
BEFORE_LAST=$(printf '%s\n' "$VIEW" | sed '$d')
for cut in $((LAST + 3)) $((LAST + 9)) $((LAST + 12)) $((LAST + 20)) $((SIZE - 4)) $((SIZE - 1)); do
    head -c "$cut" "$RUN" > "$WORK/cut.tfevents"
    expect_exit 0 "$CALF" events "$WORK/cut.tfevents"
    expect_eq "$(cat "$WORK/err")" \
        "calf: warning: $WORK/cut.tfevents: last record cut at offset $LAST (a crash while writing?); ignored" \
        "warning (cut at $cut)"
    expect_eq "$(cat "$WORK/out")" "$BEFORE_LAST" "output before the cut record (cut at $cut)"
done
expect_exit 0 "$CALF" events --csv "$WORK/cut.tfevents"
expect_eq "$(tail -n 1 "$WORK/out")" "loss,2,1700000001.25,0.5" "--csv of a cut file"
expect_in "$WORK/err" "last record cut at offset $LAST"

# ---------------------------------------------------------------- a pipe
# read as the file is, with no size to go by: the same view, the same cut-tail warning
"$CALF" events /dev/stdin < <(cat "$RUN") > "$WORK/out" 2> "$WORK/err"
expect_eq "$? $(cat "$WORK/out")" "0 $VIEW" "a pipe's view"
expect_eq "$(cat "$WORK/err")" "" "stderr of a clean pipe"
"$CALF" events /dev/stdin < <(cat "$WORK/cut.tfevents") > "$WORK/out" 2> "$WORK/err"
expect_eq "$? $(cat "$WORK/out")" "0 $BEFORE_LAST" "a cut pipe's view"
expect_eq "$(cat "$WORK/err")" \
    "calf: warning: /dev/stdin: last record cut at offset $LAST (a crash while writing?); ignored" \
    "a cut pipe's warning"
# a length of 1 GiB that passes its CRC, then 20 bytes: a cut record, not a 1 GiB buffer
big_len=$(le_hex $((1 << 30)) 8)
HEADER=$(ev_version)
( unhex "$(record "$HEADER")"; unhex "$big_len$(le_hex "$(mask "$(crc32c_hex "$big_len")")" 4)"
  head -c 20 /dev/zero ) > "$WORK/huge.tfevents"
"$CALF" events /dev/stdin < <(cat "$WORK/huge.tfevents") > "$WORK/out" 2> "$WORK/err"
expect_eq "$? $(cat "$WORK/out")" "0 file_version brain.Event:2" "a pipe cut inside a 1 GiB record"
expect_in "$WORK/err" "/dev/stdin: last record cut at offset $(( ${#HEADER} / 2 + 16 ))"

# ---------------------------------------------------------------- damage: exit 2
flip() { # FILE OFFSET: flip one bit of the byte there
    local b
    b=$(od -An -tu1 -j "$2" -N 1 "$1" | tr -d ' ')
    unhex "$(printf %02x $((b ^ 1)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
cp "$RUN" "$WORK/bad.tfevents"
flip "$WORK/bad.tfevents" $((OFFS[4] + 14))
expect_exit 2 "$CALF" events "$WORK/bad.tfevents"
expect_in "$WORK/err" "data CRC mismatch in record at offset ${OFFS[4]}"
expect_not_in "$WORK/err" "warning"
expect_eq "$(cat "$WORK/out")" "$(printf '%s\n' "$VIEW" | sed -n '1,4p')" "output before the damage"
cp "$RUN" "$WORK/bad.tfevents"
flip "$WORK/bad.tfevents" $((OFFS[5] + 2))
expect_exit 2 "$CALF" events "$WORK/bad.tfevents"
expect_in "$WORK/err" "length CRC mismatch in record at offset ${OFFS[5]}"
# the last record complete but damaged is damage, not a cut
cp "$RUN" "$WORK/bad.tfevents"
flip "$WORK/bad.tfevents" $((SIZE - 1))
expect_exit 2 "$CALF" events "$WORK/bad.tfevents"
expect_in "$WORK/err" "data CRC mismatch in record at offset $LAST"

# ---------------------------------------------------------------- usage
expect_exit 0 "$CALF" events --help
for t in "calf events [--raw] [--csv] FILE..." "session_start" "--raw" "--csv" "tag,step,wall_time,value" \
         "ends inside its last record"; do
    expect_in "$WORK/out" "$t"
done
expect_exit 2 "$CALF" events
expect_in "$WORK/err" "no FILE given"
expect_exit 2 "$CALF" events --bogus "$RUN"
expect_in "$WORK/err" "unknown option '--bogus'"
expect_exit 2 "$CALF" events "$WORK/no_such.tfevents"
expect_in "$WORK/err" "no_such.tfevents"

# ---------------------------------------------------------------- a real run
R=$WORK/real
expect_exit 0 "$CALF" train --quiet --root_dir "$R" --conf "$SRC/examples/ppo_cartpole.gin" \
    --conf_param TrainerConfig.num_iterations=3 --conf_param create_environment.num_parallel_environments=64
EV=$(ls "$R"/train/events.out.tfevents.* | head -1)
expect_exit 0 "$CALF" events "$EV"
cp "$WORK/out" "$WORK/real_full"
lines=$(wc -l < "$WORK/real_full" | tr -d ' ')
if [ "$lines" -gt 2 ]; then ok; else bad "only $lines lines from a 3-iteration run"; fi
# cut 3 bytes off: the last record (one value, one line) goes, with the warning
size=$(wc -c < "$EV" | tr -d ' ')
head -c $((size - 3)) "$EV" > "$WORK/real_cut"
expect_exit 0 "$CALF" events "$WORK/real_cut"
expect_in "$WORK/err" "calf: warning: $WORK/real_cut: last record cut at offset"
expect_eq "$(cat "$WORK/out")" "$(sed '$d' "$WORK/real_full")" "a real file cut short"
# CSV: one row per scalar line of the text form, four fields each, steps 1..3 (ALF's
# Metrics_vs_EnvironmentSteps/ tags: the env steps, 2048 per iteration of 64 envs x 32)
expect_exit 0 "$CALF" events --csv "$EV"
expect_eq "$(head -1 "$WORK/out")" "tag,step,wall_time,value" "CSV header"
scalars=$(grep -c -v -e '^file_version' -e ' histogram ' -e ' session_' "$WORK/real_full")
expect_eq "$(($(wc -l < "$WORK/out") - 1))" "$scalars" "CSV rows = scalar lines"
badrows=0
vsrows=0
while IFS=, read -r tag step wall value extra; do
    [ "$tag" = tag ] && continue
    case $tag in
    Metrics_vs_EnvironmentSteps/*)
        vsrows=$((vsrows + 1))
        case $step in 2048|4096|6144) ;; *) badrows=$((badrows + 1)) ;; esac ;;
    *) case $step in 1|2|3) ;; *) badrows=$((badrows + 1)) ;; esac ;;
    esac
    [ -n "$tag" ] && [ -n "$wall" ] && [ -n "$value" ] && [ -z "$extra" ] || badrows=$((badrows + 1))
done < "$WORK/out"
expect_eq "$badrows" 0 "malformed CSV rows"
if [ "$vsrows" -ge 3 ]; then ok; else bad "$vsrows Metrics_vs_EnvironmentSteps rows"; fi
# a resumed launch adds a second file; both read as one run
expect_exit 0 "$CALF" train --quiet --root_dir "$R" --conf "$SRC/examples/ppo_cartpole.gin" \
    --conf_param TrainerConfig.num_iterations=5 --conf_param create_environment.num_parallel_environments=64
expect_eq "$(ls "$R"/train/events.out.tfevents.* | wc -l)" 2 "one events file per launch"
expect_exit 0 "$CALF" events "$R"/train/events.out.tfevents.*
expect_eq "$(grep -c '^file_version' "$WORK/out")" 2 "two files, two version records"
if grep -q '^[45] ' "$WORK/out"; then ok; else bad "the resumed launch's steps 4, 5 missing"; fi

report e2e_events
