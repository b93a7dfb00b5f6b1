/* video_writer.c: frames to an MP4 (FFmpeg: libavcodec's H.264 encoder, libavformat's mp4
 * muxer writing into memory through a seekable AVIOContext) or an animated GIF (giflib,
 * each frame quantized to its own 256-colour palette). The bytes go to disk once, at the
 * end, by the caller. Without the libraries (CALF_HAVE_VIDEO 0) opening says what to install. */
#include "render/video_writer.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/mem.h"

int video_format_of(const char *path, video_format *fmt, calf_error *err) {
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (dot && (!slash || dot > slash)) {
        if (!strcasecmp(dot, ".mp4")) {
            *fmt = VIDEO_MP4;
            return CALF_OK;
        }
        if (!strcasecmp(dot, ".gif")) {
            *fmt = VIDEO_GIF;
            return CALF_OK;
        }
    }
    return calf_error_set(err, CALF_EINVAL, "--video %s: unknown extension; name a .mp4 or a .gif file",
                          path);
}

#if !CALF_HAVE_VIDEO

int video_writer_open(const char *path, int width, int height, double fps, video_writer **out,
                      calf_error *err) {
    (void)width, (void)height, (void)fps;
    *out = NULL;
    return calf_error_set(err, CALF_EINVAL,
                          "--video %s: this calf was built without video support; apt-get install "
                          CALF_VIDEO_PACKAGES " and build again", path);
}
int video_writer_add(video_writer *v, const uint8_t *rgb, calf_error *err) {
    (void)v, (void)rgb;
    return calf_error_set(err, CALF_EINVAL, "no video support");
}
int video_writer_finish(video_writer *v, uint8_t **data, size_t *len, calf_error *err) {
    (void)v;
    *data = NULL;
    *len = 0;
    return calf_error_set(err, CALF_EINVAL, "no video support");
}
void video_writer_abort(video_writer *v) { (void)v; }
long video_writer_frames(const video_writer *v) {
    (void)v;
    return 0;
}
int video_writer_every(const video_writer *v) {
    (void)v;
    return 1;
}
double video_writer_fps(const video_writer *v) {
    (void)v;
    return 0;
}

#else

#include <dlfcn.h>
#include <gif_lib.h>
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/error.h>
#include <libavutil/macros.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>

/* FFmpeg is loaded when the first MP4 is made, not linked: its libraries bring some 130
 * others (every codec's), which every calf process would map and load at its start
 * (and `ulimit -v` runs would not start) for videos most never write. The functions
 * below, looked up once; like the plug-ins, the libraries stay loaded for the process. */
enum { AVUTIL, AVCODEC, AVFORMAT, SWSCALE, AV_LIBS };
static const char *const av_sonames[AV_LIBS] = {
    "libavutil.so." AV_STRINGIFY(LIBAVUTIL_VERSION_MAJOR),
    "libavcodec.so." AV_STRINGIFY(LIBAVCODEC_VERSION_MAJOR),
    "libavformat.so." AV_STRINGIFY(LIBAVFORMAT_VERSION_MAJOR),
    "libswscale.so." AV_STRINGIFY(LIBSWSCALE_VERSION_MAJOR)};
#define AV_FUNCTIONS(X) \
    X(AVUTIL, av_log_get_level) X(AVUTIL, av_log_set_level) X(AVUTIL, av_malloc) \
    X(AVUTIL, av_free) X(AVUTIL, av_freep) X(AVUTIL, av_frame_alloc) \
    X(AVUTIL, av_frame_free) X(AVUTIL, av_frame_get_buffer) \
    X(AVUTIL, av_frame_make_writable) X(AVUTIL, av_opt_set) X(AVUTIL, av_strerror) \
    X(AVUTIL, av_d2q) X(AVCODEC, avcodec_find_encoder_by_name) \
    X(AVCODEC, avcodec_find_encoder) X(AVCODEC, avcodec_alloc_context3) \
    X(AVCODEC, avcodec_open2) X(AVCODEC, avcodec_parameters_from_context) \
    X(AVCODEC, avcodec_send_frame) X(AVCODEC, avcodec_receive_packet) \
    X(AVCODEC, avcodec_free_context) X(AVCODEC, av_packet_alloc) \
    X(AVCODEC, av_packet_free) X(AVCODEC, av_packet_rescale_ts) \
    X(AVFORMAT, avformat_alloc_output_context2) X(AVFORMAT, avformat_new_stream) \
    X(AVFORMAT, avformat_write_header) X(AVFORMAT, av_interleaved_write_frame) \
    X(AVFORMAT, av_write_trailer) X(AVFORMAT, avformat_free_context) \
    X(AVFORMAT, avio_alloc_context) X(AVFORMAT, avio_context_free) \
    X(AVFORMAT, avio_flush) X(SWSCALE, sws_getContext) X(SWSCALE, sws_scale) \
    X(SWSCALE, sws_freeContext)
static struct {
    bool loaded;
#define AV_POINTER(lib, f) __typeof__(f) *f;
    AV_FUNCTIONS(AV_POINTER)
#undef AV_POINTER
} av;

static int av_load(const char *path, calf_error *err) {
    if (av.loaded) return CALF_OK;
    void *lib[AV_LIBS];
    for (int i = 0; i < AV_LIBS; i++)
        if (!(lib[i] = dlopen(av_sonames[i], RTLD_NOW | RTLD_LOCAL)))
            return calf_error_set(err, CALF_EIO, "--video %s: cannot load FFmpeg: %s", path, dlerror());
#define AV_LOOKUP(l, f)                                                                        \
    if (!(av.f = (__typeof__(f) *)dlsym(lib[l], #f)))                                         \
        return calf_error_set(err, CALF_EIO, "--video %s: %s has no %s", path, av_sonames[l], #f);
    AV_FUNCTIONS(AV_LOOKUP)
#undef AV_LOOKUP
    av.loaded = true;
    return CALF_OK;
}

/* The file's bytes while it is made: a buffer the muxer may seek back into. */
typedef struct membuf {
    uint8_t *data;
    size_t len, cap, pos;
    bool failed; /* out of memory: the encoder is told, the writer fails */
} membuf;

struct video_writer {
    video_format fmt;
    char *path;        /* owned copy */
    int width, height;
    double fps;        /* of the file: the frames' rate over every, for GIF, `every`-th */
    int every;         /* the caller gives every `every`-th frame; 1 but for fast GIFs */
    long frames;       /* frames encoded */
    membuf out;
    /* MP4 */
    AVFormatContext *oc;
    AVCodecContext *enc;
    AVStream *st;
    AVFrame *frame;    /* yuv420p */
    AVPacket *pkt;
    struct SwsContext *sws;
    uint8_t *avio_buf; /* owned by avio once the context is made */
    AVIOContext *avio;
    /* GIF */
    GifFileType *gif;
    uint8_t *planes;   /* (3, height, width): R, G, B for the quantizer */
    uint8_t *indexed;  /* (height, width) palette indices */
};

static int membuf_put(membuf *b, const uint8_t *p, size_t n) {
    if (b->pos + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->pos + n) cap *= 2;
        uint8_t *grown = realloc(b->data, cap);
        if (!grown) {
            b->failed = true;
            return -1;
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->pos, p, n);
    b->pos += n;
    if (b->pos > b->len) b->len = b->pos;
    return 0;
}

/* libavformat's callbacks over the buffer (FFmpeg 5: a const buffer since libavformat 61) */
#if LIBAVFORMAT_VERSION_MAJOR >= 61
static int avio_write_cb(void *opaque, const uint8_t *buf, int n) {
#else
static int avio_write_cb(void *opaque, uint8_t *buf, int n) {
#endif
    return membuf_put(opaque, buf, (size_t)n) == 0 ? n : AVERROR(ENOMEM);
}

static int64_t avio_seek_cb(void *opaque, int64_t offset, int whence) {
    membuf *b = opaque;
    if (whence == AVSEEK_SIZE) return (int64_t)b->len;
    whence &= ~AVSEEK_FORCE;
    if (whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END) return -1;
    int64_t base = whence == SEEK_CUR ? (int64_t)b->pos : whence == SEEK_END ? (int64_t)b->len : 0;
    int64_t to = base + offset;
    if (to < 0 || to > (int64_t)b->len) return -1;
    b->pos = (size_t)to;
    return to;
}

static int gif_write_cb(GifFileType *g, const GifByteType *p, int n) {
    return membuf_put(g->UserData, p, (size_t)n) == 0 ? n : 0;
}

static const AVCodec *h264_encoder(void) {
    const AVCodec *c = av.avcodec_find_encoder_by_name("libx264");
    return c ? c : av.avcodec_find_encoder(AV_CODEC_ID_H264);
}

static int av_fail(calf_error *err, const char *path, const char *what, int averr) {
    char msg[AV_ERROR_MAX_STRING_SIZE] = "";
    av.av_strerror(averr, msg, sizeof msg);
    return calf_error_set(err, averr == AVERROR(ENOMEM) ? CALF_ENOMEM : CALF_EIO,
                          "--video %s: %s: %s", path, what, msg);
}

static int mp4_open(video_writer *v, calf_error *err) {
    int loaded = av_load(v->path, err);
    if (loaded != CALF_OK) return loaded;
    /* x264 reports its statistics at FFmpeg's default level, INFO, on stderr: calf play
     * has its own report. A host that chose a level keeps it. */
    if (av.av_log_get_level() == AV_LOG_INFO) av.av_log_set_level(AV_LOG_WARNING);
    const AVCodec *codec = h264_encoder();
    if (!codec)
        return calf_error_set(err, CALF_EIO, "--video %s: this FFmpeg has no H.264 encoder "
                              "(apt-get install libavcodec-extra)", v->path);
    int rc = av.avformat_alloc_output_context2(&v->oc, NULL, "mp4", NULL);
    if (rc < 0 || !v->oc) return av_fail(err, v->path, "no mp4 muxer", rc < 0 ? rc : AVERROR(ENOMEM));
    v->st = av.avformat_new_stream(v->oc, NULL);
    v->enc = av.avcodec_alloc_context3(codec);
    v->frame = av.av_frame_alloc();
    v->pkt = av.av_packet_alloc();
    v->avio_buf = av.av_malloc(1 << 16);
    if (!v->st || !v->enc || !v->frame || !v->pkt || !v->avio_buf)
        return av_fail(err, v->path, "starting the encoder", AVERROR(ENOMEM));
    AVRational rate = av.av_d2q(v->fps, 1000);
    v->enc->width = v->width;
    v->enc->height = v->height;
    v->enc->pix_fmt = AV_PIX_FMT_YUV420P;
    v->enc->time_base = av_inv_q(rate);
    v->enc->framerate = rate;
    v->enc->gop_size = 250;
    /* one thread: the same file on every machine, and calf's processes keep the cores */
    v->enc->thread_count = 1;
    if (v->oc->oformat->flags & AVFMT_GLOBALHEADER) v->enc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    if (!strcmp(codec->name, "libx264")) {
        av.av_opt_set(v->enc->priv_data, "preset", "fast", 0);
        av.av_opt_set(v->enc->priv_data, "crf", "23", 0);
    }
    if ((rc = av.avcodec_open2(v->enc, codec, NULL)) < 0) return av_fail(err, v->path, codec->name, rc);
    if ((rc = av.avcodec_parameters_from_context(v->st->codecpar, v->enc)) < 0)
        return av_fail(err, v->path, "stream parameters", rc);
    v->st->time_base = v->enc->time_base;
    v->st->avg_frame_rate = rate;
    v->avio = av.avio_alloc_context(v->avio_buf, 1 << 16, 1, &v->out, NULL, avio_write_cb, avio_seek_cb);
    if (!v->avio) return av_fail(err, v->path, "starting the muxer", AVERROR(ENOMEM));
    v->avio_buf = NULL; /* the context's now */
    v->oc->pb = v->avio;
    v->oc->flags |= AVFMT_FLAG_CUSTOM_IO | AVFMT_FLAG_BITEXACT;
    if ((rc = av.avformat_write_header(v->oc, NULL)) < 0) return av_fail(err, v->path, "mp4 header", rc);
    v->frame->format = AV_PIX_FMT_YUV420P;
    v->frame->width = v->width;
    v->frame->height = v->height;
    if ((rc = av.av_frame_get_buffer(v->frame, 0)) < 0) return av_fail(err, v->path, "a frame", rc);
    v->sws = av.sws_getContext(v->width, v->height, AV_PIX_FMT_RGB24, v->width, v->height,
                            AV_PIX_FMT_YUV420P, SWS_BILINEAR, NULL, NULL, NULL);
    if (!v->sws) return av_fail(err, v->path, "colour conversion", AVERROR(ENOMEM));
    return CALF_OK;
}

/* Send frame (NULL: the end) and mux every packet the encoder gives back. */
static int mp4_encode(video_writer *v, AVFrame *frame, calf_error *err) {
    int rc = av.avcodec_send_frame(v->enc, frame);
    if (rc < 0) return av_fail(err, v->path, "encoding", rc);
    for (;;) {
        rc = av.avcodec_receive_packet(v->enc, v->pkt);
        if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return CALF_OK;
        if (rc < 0) return av_fail(err, v->path, "encoding", rc);
        av.av_packet_rescale_ts(v->pkt, v->enc->time_base, v->st->time_base);
        v->pkt->stream_index = v->st->index;
        rc = av.av_interleaved_write_frame(v->oc, v->pkt);
        if (rc < 0) return av_fail(err, v->path, "muxing", rc);
    }
}

static int mp4_add(video_writer *v, const uint8_t *rgb, calf_error *err) {
    int rc = av.av_frame_make_writable(v->frame);
    if (rc < 0) return av_fail(err, v->path, "a frame", rc);
    const uint8_t *src[1] = {rgb};
    const int stride[1] = {3 * v->width};
    av.sws_scale(v->sws, src, stride, 0, v->height, v->frame->data, v->frame->linesize);
    v->frame->pts = v->frames;
    return mp4_encode(v, v->frame, err);
}

static int mp4_finish(video_writer *v, calf_error *err) {
    int rc = mp4_encode(v, NULL, err);
    if (rc != CALF_OK) return rc;
    int avrc = av.av_write_trailer(v->oc);
    if (avrc < 0) return av_fail(err, v->path, "mp4 trailer", avrc);
    av.avio_flush(v->avio);
    return CALF_OK;
}

static int gif_fail(calf_error *err, const char *path, int code) {
    return calf_error_set(err, code == E_GIF_ERR_NOT_ENOUGH_MEM ? CALF_ENOMEM : CALF_EIO,
                          "--video %s: giflib: %s", path, GifErrorString(code));
}

static int gif_open(video_writer *v, calf_error *err) {
    int code = 0;
    size_t n = (size_t)v->width * v->height;
    v->planes = mem_alloc(3 * n, err);
    v->indexed = v->planes ? mem_alloc(n, err) : NULL;
    if (!v->indexed) return CALF_ENOMEM;
    v->gif = EGifOpen(&v->out, gif_write_cb, &code);
    if (!v->gif) return gif_fail(err, v->path, code);
    EGifSetGifVersion(v->gif, true);
    if (EGifPutScreenDesc(v->gif, v->width, v->height, 8, 0, NULL) == GIF_ERROR)
        return gif_fail(err, v->path, v->gif->Error);
    /* NETSCAPE2.0: loop forever */
    static const GifByteType loop[3] = {1, 0, 0};
    if (EGifPutExtensionLeader(v->gif, APPLICATION_EXT_FUNC_CODE) == GIF_ERROR ||
        EGifPutExtensionBlock(v->gif, 11, "NETSCAPE2.0") == GIF_ERROR ||
        EGifPutExtensionBlock(v->gif, 3, loop) == GIF_ERROR ||
        EGifPutExtensionTrailer(v->gif) == GIF_ERROR)
        return gif_fail(err, v->path, v->gif->Error);
    return CALF_OK;
}

static int gif_add(video_writer *v, const uint8_t *rgb, calf_error *err) {
    size_t n = (size_t)v->width * v->height;
    uint8_t *r = v->planes, *g = r + n, *b = g + n;
    for (size_t i = 0; i < n; i++) {
        r[i] = rgb[3 * i];
        g[i] = rgb[3 * i + 1];
        b[i] = rgb[3 * i + 2];
    }
    GifColorType colors[256];
    memset(colors, 0, sizeof colors);
    int count = 256;
    if (GifQuantizeBuffer((unsigned)v->width, (unsigned)v->height, &count, r, g, b, v->indexed,
                          colors) == GIF_ERROR)
        return calf_error_set(err, CALF_ENOMEM, "--video %s: giflib could not quantize a frame", v->path);
    /* the quantizer's colours are 5 bits a channel (white comes out 248): each entry
     * becomes the mean of the pixels it stands for, so flat colours stay exact */
    double sum[256][3] = {{0}};
    long count_of[256] = {0};
    for (size_t i = 0; i < n; i++) {
        int k = v->indexed[i];
        sum[k][0] += r[i], sum[k][1] += g[i], sum[k][2] += b[i];
        count_of[k]++;
    }
    for (int k = 0; k < 256; k++)
        if (count_of[k] > 0) {
            colors[k].Red = (GifByteType)(sum[k][0] / count_of[k] + 0.5);
            colors[k].Green = (GifByteType)(sum[k][1] / count_of[k] + 0.5);
            colors[k].Blue = (GifByteType)(sum[k][2] / count_of[k] + 0.5);
        }
    ColorMapObject *map = GifMakeMapObject(256, colors);
    if (!map) return calf_error_set(err, CALF_ENOMEM, "--video %s: out of memory for a palette", v->path);
    /* delays in hundredths of a second, rounded so their sum keeps the frame rate; 2 at
     * least (viewers play shorter delays slowly) */
    long t0 = (long)(v->frames * 100.0 / v->fps + 0.5), t1 = (long)((v->frames + 1) * 100.0 / v->fps + 0.5);
    long delay = t1 - t0 < 2 ? 2 : t1 - t0;
    GifByteType gce[4] = {0, (GifByteType)(delay & 0xff), (GifByteType)(delay >> 8), 0};
    int rc = EGifPutExtension(v->gif, GRAPHICS_EXT_FUNC_CODE, 4, gce) == GIF_ERROR ||
             EGifPutImageDesc(v->gif, 0, 0, v->width, v->height, false, map) == GIF_ERROR;
    for (int y = 0; y < v->height && !rc; y++)
        rc = EGifPutLine(v->gif, v->indexed + (size_t)y * v->width, v->width) == GIF_ERROR;
    GifFreeMapObject(map);
    return rc ? gif_fail(err, v->path, v->gif->Error) : CALF_OK;
}

static int gif_finish(video_writer *v, calf_error *err) {
    int code = 0;
    int rc = EGifCloseFile(v->gif, &code);
    v->gif = NULL;
    return rc == GIF_ERROR ? gif_fail(err, v->path, code) : CALF_OK;
}

void video_writer_abort(video_writer *v) {
    if (!v) return;
    if (v->gif) {
        int code;
        EGifCloseFile(v->gif, &code);
    }
    if (av.loaded) { /* an MP4's: FFmpeg was loaded before any of them was made */
        if (v->oc) av.avformat_free_context(v->oc);
        if (v->avio) {
            av.av_freep(&v->avio->buffer);
            av.avio_context_free(&v->avio);
        }
        av.av_free(v->avio_buf);
        av.avcodec_free_context(&v->enc);
        av.av_frame_free(&v->frame);
        av.av_packet_free(&v->pkt);
        av.sws_freeContext(v->sws);
    }
    free(v->planes);
    free(v->indexed);
    free(v->out.data);
    free(v->path);
    free(v);
}

int video_writer_open(const char *path, int width, int height, double fps, video_writer **out,
                      calf_error *err) {
    *out = NULL;
    video_format fmt;
    int rc = video_format_of(path, &fmt, err);
    if (rc != CALF_OK) return rc;
    if (fmt == VIDEO_MP4 && (width % 2 || height % 2))
        return calf_error_set(err, CALF_EINVAL,
                              "--video %s: an MP4 (H.264, 4:2:0) needs an even width and height, "
                              "not %dx%d", path, width, height);
    video_writer *v = mem_calloc(1, sizeof *v, err);
    if (!v) return CALF_ENOMEM;
    v->fmt = fmt;
    v->width = width;
    v->height = height;
    v->fps = fps > 0 ? fps : 30;
    /* GIF delays are whole hundredths of a second and viewers play those under 2 slowly:
     * a faster env (Hopper's 125 frames per second) keeps every k-th frame, at fps / k */
    v->every = 1;
    if (fmt == VIDEO_GIF)
        while (v->fps / v->every > 50) v->every++;
    v->fps /= v->every;
    v->path = strdup(path);
    if (!v->path) rc = calf_error_set(err, CALF_ENOMEM, "out of memory for --video %s", path);
    else rc = fmt == VIDEO_MP4 ? mp4_open(v, err) : gif_open(v, err);
    if (rc != CALF_OK) {
        video_writer_abort(v);
        return rc;
    }
    *out = v;
    return CALF_OK;
}

int video_writer_add(video_writer *v, const uint8_t *rgb, calf_error *err) {
    int rc = v->fmt == VIDEO_MP4 ? mp4_add(v, rgb, err) : gif_add(v, rgb, err);
    if (rc == CALF_OK && v->out.failed)
        rc = calf_error_set(err, CALF_ENOMEM, "--video %s: out of memory for the file", v->path);
    if (rc == CALF_OK) v->frames++;
    return rc;
}

long video_writer_frames(const video_writer *v) { return v->frames; }
int video_writer_every(const video_writer *v) { return v->every; }
double video_writer_fps(const video_writer *v) { return v->fps; }

int video_writer_finish(video_writer *v, uint8_t **data, size_t *len, calf_error *err) {
    *data = NULL;
    *len = 0;
    int rc = v->fmt == VIDEO_MP4 ? mp4_finish(v, err) : gif_finish(v, err);
    if (rc == CALF_OK && v->out.failed)
        rc = calf_error_set(err, CALF_ENOMEM, "--video %s: out of memory for the file", v->path);
    if (rc == CALF_OK) {
        *data = v->out.data;
        *len = v->out.len;
        v->out.data = NULL;
    }
    video_writer_abort(v);
    return rc;
}

#endif
