#ifndef DRASYNC_QUANTITY_H
#define DRASYNC_QUANTITY_H

/*
 * Byte quantities as Kubernetes writes them: digits and a binary (Ki, Mi, Gi,
 * Ti) or decimal (k, M, G, T) suffix, or none ("10Mi", "500Ki", "2000000").
 */

#include <stddef.h>
#include <stdint.h>

/**
 * Parse s into *out.
 * @param bad  set to the offset of what does not parse (0 for an empty or
 *             over-large value)
 * @return 0; -EINVAL (not a quantity); -ERANGE (over 2^64 - 1)
 */
int ds_quantity_parse_bytes(const char *s, uint64_t *out, size_t *bad);

#endif
