/* The Pod Security levels by name (pod_security.c has the checks). */

#include "drasync/pod_security.h"

#include "drasync/string_table.h"

#include <errno.h>

static const char *const level_table[DS_PSS_LEVEL_MAX] = {
    [DS_PSS_PRIVILEGED] = "privileged",
    [DS_PSS_BASELINE] = "baseline",
    [DS_PSS_RESTRICTED] = "restricted",
};
DS_DEFINE_PRIVATE_STRING_TABLE_LOOKUP(level, enum ds_pss_level)

int ds_pss_level_parse(const char *name, enum ds_pss_level *out)
{
	int v = name ? level_from_string(name) : -EINVAL;

	if (v < 0)
		return -EINVAL;
	*out = (enum ds_pss_level)v;
	return 0;
}

const char *ds_pss_level_name(enum ds_pss_level level)
{
	const char *s = level_to_string(level);

	return s ? s : "unknown";
}
