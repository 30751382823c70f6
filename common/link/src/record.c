#include "drasync/record.h"

#include "drasync/string_table.h"

#include <openssl/evp.h>
#include <string.h>

/* 0 is no operation and no status on the wire: it has no name */
static const char *const ds_record_op_table[DS_RECORD_OP_MAX] = {
    [DS_RECORD_UPSERT] = "upsert",
    [DS_RECORD_DELETE] = "delete",
    [DS_RECORD_SNAPSHOT_BEGIN] = "snapshot-begin",
    [DS_RECORD_SNAPSHOT_END] = "snapshot-end",
    [DS_RECORD_RELOCATE] = "relocate",
    [DS_RECORD_SNAPSHOT_PART] = "snapshot-part",
};
static const char *const ds_result_status_table[DS_RESULT_STATUS_MAX] = {
    [DS_RESULT_OK] = "ok",	     [DS_RESULT_DUPLICATE] = "duplicate",
    [DS_RESULT_FAILED] = "failed",   [DS_RESULT_SKIPPED] = "skipped",
    [DS_RESULT_APPLIED] = "applied", [DS_RESULT_WAITING] = "waiting",
    [DS_RESULT_HELD] = "held",	     [DS_RESULT_REFUSED] = "refused",
};
DS_DEFINE_PRIVATE_STRING_TABLE_LOOKUP(ds_record_op, enum ds_record_op)
DS_DEFINE_PRIVATE_STRING_TABLE_LOOKUP(ds_result_status, enum ds_result_status)

const char *ds_record_op_name(enum ds_record_op op)
{
	const char *s = ds_record_op_to_string(op);

	return s ? s : "unknown";
}

const char *ds_result_status_name(enum ds_result_status status)
{
	const char *s = ds_result_status_to_string(status);

	return s ? s : "unknown";
}

void ds_record_hash(const void *data, size_t len, uint8_t out[DS_HASH_LEN])
{
	unsigned int n = 0;

	/* EVP_Digest cannot fail for SHA-256 short of memory; zero out on failure
	 * so a hash never matches by accident. */
	if (!EVP_Digest(data ? data : "", len, out, &n, EVP_sha256(), NULL) || n != DS_HASH_LEN)
		memset(out, 0, DS_HASH_LEN);
}
