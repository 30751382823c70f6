#ifndef DRASYNC_STRING_TABLE_H
#define DRASYNC_STRING_TABLE_H

/*
 * One string table per enum, and the two lookups it defines (systemd's
 * DEFINE_STRING_TABLE_LOOKUP is the model). Write the table as
 *
 *     static const char *const ds_mode_table[DS_MODE_MAX] = {
 *         [DS_MODE_MIGRATE] = "migrate",
 *         [DS_MODE_STANDBY] = "standby",
 *     };
 *     DS_DEFINE_STRING_TABLE_LOOKUP(ds_mode, enum ds_mode)
 *
 * which defines
 *
 *     const char *ds_mode_to_string(enum ds_mode v);  NULL for a value outside the table
 *     int ds_mode_from_string(const char *s);        the value, or -EINVAL
 *
 * An unknown string is -EINVAL, never a default: a value written by a newer
 * version must not pass for one this version knows. Entries left NULL (a
 * sparse table) are neither printed nor parsed. Declare the pair in a header
 * with DS_DECLARE_STRING_TABLE_LOOKUP(); DS_DEFINE_PRIVATE_STRING_TABLE_LOOKUP()
 * defines them static for one file.
 */

#include <errno.h>
#include <stddef.h>
#include <string.h>

#define DS_ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

#define DS_DECLARE_STRING_TABLE_LOOKUP(name, type)                                                 \
	const char *name##_to_string(type v);                                                      \
	int name##_from_string(const char *s)

#define DS_STRING_TABLE_TO_STRING(name, type, scope)                                               \
	scope const char *name##_to_string(type v)                                                 \
	{                                                                                          \
		size_t i = (size_t)v;                                                              \
                                                                                                   \
		return i < DS_ELEMENTSOF(name##_table) ? name##_table[i] : NULL;                   \
	}

#define DS_STRING_TABLE_FROM_STRING(name, type, scope)                                             \
	scope int name##_from_string(const char *s)                                                \
	{                                                                                          \
		if (!s)                                                                            \
			return -EINVAL;                                                            \
		for (size_t i = 0; i < DS_ELEMENTSOF(name##_table); i++)                           \
			if (name##_table[i] && strcmp(name##_table[i], s) == 0)                    \
				return (int)i;                                                     \
		return -EINVAL;                                                                    \
	}

#define DS_DEFINE_STRING_TABLE_LOOKUP(name, type)                                                  \
	DS_STRING_TABLE_TO_STRING(name, type, )                                                    \
	DS_STRING_TABLE_FROM_STRING(name, type, )

/* static inline: a file may use one of the pair without an unused-function warning */
#define DS_DEFINE_PRIVATE_STRING_TABLE_LOOKUP(name, type)                                          \
	DS_STRING_TABLE_TO_STRING(name, type, static inline)                                       \
	DS_STRING_TABLE_FROM_STRING(name, type, static inline)

#endif
