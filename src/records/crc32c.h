/* crc32c.h: CRC-32C (Castagnoli), the checksum TFRecord framing requires and the one
 * calf's checkpoint container reuses. Table-driven, slice-by-8, no CPU-specific code,
 * so every machine computes the same value for the same bytes. */
#ifndef CALF_CRC32C_H
#define CALF_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continue a CRC over more bytes: crc32c_update(crc32c_update(0, a, n), b, m) equals the
 * CRC of a followed by b. Start from 0. */
uint32_t crc32c_update(uint32_t crc, const void *data, size_t n);
static inline uint32_t crc32c(const void *data, size_t n) { return crc32c_update(0, data, n); }

/* TFRecord stores CRCs masked, because a CRC computed over bytes that themselves
 * contain CRCs is weak; these are TensorFlow's exact mask and its inverse. */
static inline uint32_t crc32c_mask(uint32_t crc) {
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
static inline uint32_t crc32c_unmask(uint32_t masked) {
    uint32_t rot = masked - 0xa282ead8u;
    return (rot >> 17) | (rot << 15);
}

/* The 8 x 256 lookup tables, row-major; only tests read them. */
const uint32_t *crc32c_table_for_testing(void);

#endif
