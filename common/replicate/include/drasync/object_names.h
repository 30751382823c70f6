#ifndef DRASYNC_OBJECT_NAMES_H
#define DRASYNC_OBJECT_NAMES_H

/*
 * Object names and namespaces as the API server validates them (apimachinery's
 * validation): a DNS-1123 label (at most 63 characters of [a-z0-9-], starting
 * and ending alphanumeric) for a Namespace, a DNS-1035 label (a label that
 * starts with a letter) for a Service, a DNS-1123 subdomain (at most 253,
 * dot-separated labels; a CronJob at most 52) for the other kinds drasync
 * replicates, and never "." or ".." or a name with "/" or "%" (they are path
 * segments).
 * Names come from the wire: from another trust domain.
 */

#include <stdbool.h>
#include <stddef.h>

bool ds_name_is_dns1123_label(const char *s);
bool ds_name_is_dns1123_subdomain(const char *s);
/** A DNS-1123 label that starts with a letter ([a-z]([-a-z0-9]*[a-z0-9])?, at most 63). */
bool ds_name_is_dns1035_label(const char *s);

/**
 * Whether name is a valid metadata.name for an object of kind (the kind
 * table's name; another kind is held to the subdomain rule). On -EINVAL, why
 * says what is wrong, with the name quoted and cut to a readable length.
 * @return 0, or -EINVAL
 */
int ds_name_check(const char *kind, const char *name, char *why, size_t size);

/** As ds_name_check(), for a namespace name (a DNS-1123 label). @return 0, or -EINVAL */
int ds_name_check_namespace(const char *ns, char *why, size_t size);

#endif
