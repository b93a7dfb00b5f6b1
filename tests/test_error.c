/* test_error.c: error messages keep what failed and why however long the paths in
 * them are (calf_error_fit cuts the middle), stay one line, and return their status. */
#include <string.h>

#include "calf/error.h"
#include "test_util.h"

int main(void) {
    calf_error err;
    calf_error_clear(&err);
    CHECK_INT_EQ(err.status, CALF_OK);
    CHECK_STR_EQ(err.msg, "");

    /* short: as formatted, newlines made spaces */
    CHECK_INT_EQ(calf_error_set(&err, CALF_EIO, "write %s: %s", "a\nb", "No space"), CALF_EIO);
    CHECK_INT_EQ(err.status, CALF_EIO);
    CHECK_STR_EQ(err.msg, "write a b: No space");
    CHECK_INT_EQ(calf_error_set(NULL, CALF_EINVAL, "nowhere"), CALF_EINVAL);

    /* a 4,050-character path: the start and the cause survive, the middle is cut */
    static char path[4051];
    for (int i = 0; i < 4050; i++) path[i] = (char)('a' + i % 26);
    path[0] = '/';
    path[4050] = '\0';
    calf_error_set(&err, CALF_EIO, "checkpoint: write %s/ckpt-6.tmp.42: %s", path,
                   "No space left on device");
    size_t n = strlen(err.msg);
    CHECK_INT_EQ(n, sizeof err.msg - 1);
    CHECK(strncmp(err.msg, "checkpoint: write /bcdef", 24) == 0);
    const char *tail = "/ckpt-6.tmp.42: No space left on device";
    CHECK(n > strlen(tail) && strcmp(err.msg + n - strlen(tail), tail) == 0);
    /* the marker states how much went: 4050 + 63 characters formatted, 1023 kept */
    size_t whole = strlen("checkpoint: write ") + 4050 + strlen(tail);
    char marker[64];
    const char *m = strstr(err.msg, "[... ");
    CHECK(m != NULL);
    size_t mlen = m ? strcspn(m, "]") + 1 : 0;
    snprintf(marker, sizeof marker, "[... %zu characters cut ...]", whole - (n - mlen));
    CHECK(m != NULL && strncmp(m, marker, strlen(marker)) == 0);
    CHECK(strchr(err.msg, '\n') == NULL);

    /* fit on its own: exactly cap - 1 fits whole; one more is cut */
    char small[64], src[80];
    memset(src, 'x', 63);
    src[63] = '\0';
    calf_error_fit(small, sizeof small, src);
    CHECK_STR_EQ(small, src);
    memset(src, 'y', 79);
    src[79] = '\0';
    src[0] = 'A';
    src[78] = 'Z';
    calf_error_fit(small, sizeof small, src);
    CHECK_INT_EQ(strlen(small), 63);
    CHECK(small[0] == 'A' && small[62] == 'Z');
    CHECK(strstr(small, "characters cut ...]") != NULL);
    return test_report("test_error");
}
