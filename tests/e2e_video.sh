#!/usr/bin/env bash
# e2e_video.sh: calf play --video on tiny trained runs: ffprobe reads the MP4 (H.264) and
# GIF it writes with the frame count the episodes make (one frame after the reset and
# each step), the size asked for and the env's frame rate, for CartPole and (with MuJoCo)
# HalfCheetah; the report is the one without --video; errors (extension, path, size, a
# plug-in env without a render hook, Ctrl-C) are one line, the right exit, and no file.
# A calf without video support says which packages to install.
. "$(dirname "$0")/lib_e2e.sh"

small_gin "$WORK/cp.gin"
expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/cp" --conf "$WORK/cp.gin"

if ! "$CALF" --version | grep -q "^videos (calf play --video): built in"; then
    expect_exit 2 "$CALF" play --root_dir "$WORK/cp" --video "$WORK/v.mp4"
    expect_in "$WORK/err" "apt-get install libcairo2-dev"
    [ ! -e "$WORK/v.mp4" ] && ok || bad "a file was written without video support"
    report e2e_video || exit 1
    echo "skipped: the rest needs a calf built with video support ($("$CALF" --version | tail -1))"
    exit 77
fi
if ! command -v ffprobe >/dev/null; then
    echo "skipped: no ffprobe to read the videos (apt-get install ffmpeg)"
    exit 77
fi

# probe FILE: "codec,width,height,frame rate,frames" as ffprobe decodes them
probe() {
    ffprobe -v error -count_frames -select_streams v:0 \
        -show_entries stream=codec_name,width,height,r_frame_rate,nb_read_frames -of csv=p=0 "$1"
}
# frames_of: the frames the report's episodes make, return + 1 each (CartPole pays 1 a step)
frames_of() {
    sed -n 's/^episode [0-9]*: return \([0-9]*\)\.000$/\1/p' "$1" | awk '{n += $1 + 1} END {print n}'
}

expect_exit 0 "$CALF" play --root_dir "$WORK/cp" --num_episodes 3
grep "return" "$WORK/out" >"$WORK/plain"
expect_exit 0 "$CALF" play --root_dir "$WORK/cp" --num_episodes 3 --video "$WORK/cp.mp4"
grep "return" "$WORK/out" >"$WORK/recorded"
expect_same_file "$WORK/plain" "$WORK/recorded"
n=$(frames_of "$WORK/out")
expect_in "$WORK/out" "video: $WORK/cp.mp4, $n frames of 480x480 at 50 frames per second"
expect_eq "$(probe "$WORK/cp.mp4")" "h264,480,480,50/1,$n" "CartPole MP4"

# --max_frames: the first 25 of the episodes' frames (the three make more: $n)
expect_exit 0 "$CALF" play --root_dir "$WORK/cp" --num_episodes 3 --video "$WORK/cp.gif" \
    --width 160 --height 90 --max_frames 25
[ "$n" -gt 25 ] && ok || bad "the episodes make only $n frames"
expect_eq "$(probe "$WORK/cp.gif")" "gif,160,90,50/1,25" "CartPole GIF, 25 frames"
# the frames differ from one another (the cart and pole move) and from a white picture
ffmpeg -v error -i "$WORK/cp.gif" -f rawvideo -pix_fmt rgb24 "$WORK/cp.rgb"
distinct=$(split -b $((160 * 90 * 3)) -d -a 3 "$WORK/cp.rgb" "$WORK/frame." && md5sum "$WORK"/frame.* | cut -d' ' -f1 | sort -u | wc -l)
[ "$distinct" -gt 5 ] && ok || bad "only $distinct distinct GIF frames of 25"
white=$(head -c $((160 * 90 * 3)) /dev/zero | tr '\0' '\377' | md5sum | cut -d' ' -f1)
expect_not_in <(md5sum "$WORK"/frame.* | cut -d' ' -f1) "$white"

# errors: one line, exit 2 (input) or 1 (the file system), nothing written
expect_exit 2 "$CALF" play --root_dir "$WORK/cp" --video "$WORK/v.avi"
expect_in "$WORK/err" "unknown extension; name a .mp4 or a .gif file"
expect_eq "$(wc -l <"$WORK/err")" 1 "one line"
expect_exit 2 "$CALF" play --root_dir "$WORK/cp" --video "$WORK/v.mp4" --width 161
expect_in "$WORK/err" "needs an even width and height"
expect_exit 2 "$CALF" play --root_dir "$WORK/cp" --width 64
expect_in "$WORK/err" "need --video FILE"
expect_exit 2 "$CALF" play --root_dir "$WORK/cp" --video "$WORK/v.gif" --width 0
expect_exit 1 "$CALF" play --root_dir "$WORK/cp" --video "$WORK/no/such/dir/v.mp4"
expect_in "$WORK/err" "cannot write $WORK/no/such/dir/v.mp4: No such file or directory"
mkdir "$WORK/d.gif"
expect_exit 1 "$CALF" play --root_dir "$WORK/cp" --video "$WORK/d.gif"
expect_in "$WORK/err" "Is a directory"
# a read-only file is refused before any frame is drawn, and left as it was; a writable
# one is replaced and keeps its permissions
echo precious > "$WORK/ro.gif"
chmod 444 "$WORK/ro.gif"
expect_exit 1 "$CALF" play --root_dir "$WORK/cp" --video "$WORK/ro.gif"
expect_in "$WORK/err" "cannot write $WORK/ro.gif: it is read-only (mode 0444), and calf does not replace it"
expect_eq "$(wc -l <"$WORK/err")" 1 "one line"
expect_eq "$(cat "$WORK/ro.gif") $(stat -c %a "$WORK/ro.gif")" "precious 444" "the read-only file"
echo old > "$WORK/rw.gif"
chmod 600 "$WORK/rw.gif"
expect_exit 0 "$CALF" play --root_dir "$WORK/cp" --num_episodes 1 --video "$WORK/rw.gif" --width 32 --height 32
expect_eq "$(head -c 6 "$WORK/rw.gif") $(stat -c %a "$WORK/rw.gif")" "GIF89a 600" "the replaced file"
[ ! -e "$WORK/v.mp4" ] && [ ! -e "$WORK/v.avi" ] && [ ! -e "$WORK/v.gif" ] && ok ||
    bad "a failed --video left a file"

# Ctrl-C while recording: exit 130, no video and no temporary file
mkdir "$WORK/int"
"$CALF" play --root_dir "$WORK/cp" --num_episodes 100000 --video "$WORK/int/long.mp4" \
    >"$WORK/int_out" 2>"$WORK/int_err" &
pid=$!
sleep 1
kill -INT $pid
wait $pid
expect_eq "$?" 130 "exit status after Ctrl-C"
expect_eq "$(ls -A "$WORK/int")" "" "files left after Ctrl-C"

# a plug-in env without a render hook cannot be drawn
LIB=${CALF_PLUGIN_EXAMPLE:-}
if [ -n "$LIB" ] && [ -f "$LIB" ]; then
    cat >"$WORK/corridor.gin" <<GIN
include '$WORK/cp.gin'
create_environment.env_name = "Corridor-v0"
GIN
    expect_exit 0 "$CALF" train --quiet --env_lib "$LIB" --root_dir "$WORK/co" --conf "$WORK/corridor.gin"
    expect_exit 0 "$CALF" play --env_lib "$LIB" --root_dir "$WORK/co" --num_episodes 2 --video "$WORK/co.gif" \
        --width 64 --height 16
    expect_eq "$(probe "$WORK/co.gif" | cut -d, -f1-4)" "gif,64,16,10/1" "the example plug-in's own drawing"
else
    echo "note: CALF_PLUGIN_EXAMPLE not set; the plug-in hook is checked by test_render"
fi
# ... and one without a hook cannot be drawn: exit 2 naming it, nothing written
cat >"$WORK/blind.c" <<'CSRC'
#include "calf/env.h"
typedef struct blind_state { int t; } blind_state;
static void blind_reset(void *s, calf_rng *rng, float *obs) {
    (void)rng;
    ((blind_state *)s)->t = 0;
    obs[0] = 0;
}
static int blind_step(void *s, calf_rng *rng, int a, const float *u, float *obs, float *r) {
    (void)rng, (void)u;
    obs[0] = (float)++((blind_state *)s)->t;
    *r = (float)a;
    return 0;
}
static const calf_env_class blind = {
    .spec = {.name = "Blind-v0", .obs_dim = 1, .num_actions = 2, .max_episode_steps = 5,
             .state_size = sizeof(blind_state)},
    .reset = blind_reset, .step = blind_step};
int calf_plugin_register(int abi, calf_error *err) {
    int rc = CALF_PLUGIN_CHECK_ABI(abi, err);
    return rc ? rc : calf_env_register(&blind, err);
}
CSRC
if ${CC:-cc} -shared -fPIC -I"$SRC/include" "$WORK/blind.c" -o "$WORK/blind.so"; then
    printf "include '%s'\ncreate_environment.env_name = \"Blind-v0\"\n" "$WORK/cp.gin" >"$WORK/blind.gin"
    expect_exit 0 "$CALF" train --quiet --env_lib "$WORK/blind.so" --root_dir "$WORK/bl" --conf "$WORK/blind.gin"
    expect_exit 2 "$CALF" play --env_lib "$WORK/blind.so" --root_dir "$WORK/bl" --video "$WORK/bl.mp4"
    expect_in "$WORK/err" "Blind-v0 cannot be drawn: its plug-in class has no render hook"
    [ ! -e "$WORK/bl.mp4" ] && ok || bad "a video of an env that cannot be drawn"
else
    bad "cannot build the test plug-in"
fi

if "$CALF" --version | grep -q "MuJoCo envs: built in"; then
    # train_tiny ROOT EXAMPLE: one iteration of 2 envs x 16 steps of the example config
    train_tiny() {
        expect_exit 0 "$CALF" train --quiet --root_dir "$1" --conf "$SRC/examples/$2" \
            --conf_param create_environment.num_parallel_environments=2 \
            --conf_param TrainerConfig.unroll_length=16 --conf_param TrainerConfig.mini_batch_size=16 \
            --conf_param TrainerConfig.num_updates_per_train_iter=1 \
            --conf_param TrainerConfig.num_env_steps=0 --conf_param TrainerConfig.num_iterations=1 \
            --conf_param TrainerConfig.evaluate=False
    }
    train_tiny "$WORK/hc" ppo_halfcheetah.gin
    expect_exit 0 "$CALF" play --root_dir "$WORK/hc" --num_episodes 1 --video "$WORK/hc.mp4" \
        --width 96 --height 64 --max_frames 12
    expect_eq "$(probe "$WORK/hc.mp4")" "h264,96,64,20/1,12" "HalfCheetah MP4"
    expect_exit 0 "$CALF" play --root_dir "$WORK/hc" --num_episodes 1 --video "$WORK/hc.gif" \
        --width 96 --height 64 --max_frames 3
    expect_eq "$(probe "$WORK/hc.gif")" "gif,96,64,20/1,3" "HalfCheetah GIF"
    # Hopper's 125 frames per second: its GIF keeps every third frame, at 125 / 3
    train_tiny "$WORK/ho" ppo_hopper.gin
    expect_exit 0 "$CALF" play --root_dir "$WORK/ho" --num_episodes 1 --video "$WORK/ho.gif" \
        --width 64 --height 64 --max_frames 4
    expect_in "$WORK/out" "4 frames of 64x64 at 41.6667 frames per second"
    expect_eq "$(probe "$WORK/ho.gif" | cut -d, -f1-3,5)" "gif,64,64,4" "Hopper GIF"
else
    echo "note: no MuJoCo in this calf; its videos are not checked"
fi

report e2e_video
