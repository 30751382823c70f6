#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu_trust.h"

#include "tu_http.h"
#include "tu_kube.h"

#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long long tu_trust_writes(ds_kube *k, const char *resource, char *detail, size_t size)
{
	return tu_kube_writes_of(
	    k, resource, (const char *const[]){"POST", "PUT", "PATCH", "APPLY", "DELETE", NULL},
	    detail, size);
}

double tu_trust_metric(const char *base, const char *name, const char *const labels[])
{
	char url[256], *text;
	size_t n = strlen(name);
	double v = 0;

	snprintf(url, sizeof(url), "%s/metrics", base);
	text = tu_http_get(url, 200);
	for (char *p = text; p && *p;) {
		char *e = strchr(p, '\n');
		bool all = true;
		const char *close;

		if (e)
			*e = '\0';
		if (strncmp(p, name, n) == 0 && p[n] == '{' && (close = strchr(p, '}'))) {
			for (size_t i = 0; labels && labels[i] && labels[i + 1]; i += 2) {
				char want[300];

				snprintf(want, sizeof(want), "%s=\"%s\"", labels[i], labels[i + 1]);
				all = all && strstr(p, want) && strstr(p, want) < close;
			}
			if (all)
				v += strtod(close + 1, NULL);
		}
		p = e ? e + 1 : NULL;
	}
	free(text);
	return v;
}

static sqlite3 *open_ro(const char *ledger)
{
	sqlite3 *db = NULL;

	if (sqlite3_open_v2(ledger, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
		fail_msg("ledger %s: %s", ledger, db ? sqlite3_errmsg(db) : "cannot open");
	sqlite3_busy_timeout(db, 10000);
	return db;
}

static void copy_col(sqlite3_stmt *st, int col, char *out, size_t size)
{
	const unsigned char *t = sqlite3_column_text(st, col);

	snprintf(out, size, "%s", t ? (const char *)t : "");
}

tu_trust_row tu_trust_ledger_row(const char *ledger, const char *source, const char *kind,
				 const char *ns, const char *name)
{
	static const char sql[] =
	    "SELECT state, reason, target_name FROM object_state WHERE source = ?1 AND kind = ?2"
	    " AND (namespace = ?3 OR (?3 = '' AND namespace IS NULL)) AND name = ?4";
	tu_trust_row row;
	sqlite3 *db = open_ro(ledger);
	sqlite3_stmt *st = NULL;

	memset(&row, 0, sizeof(row));
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		fail_msg("ledger: %s", sqlite3_errmsg(db));
	sqlite3_bind_text(st, 1, source, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, ns ? ns : "", -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, name, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW) {
		copy_col(st, 0, row.state, sizeof(row.state));
		copy_col(st, 1, row.reason, sizeof(row.reason));
		copy_col(st, 2, row.target_name, sizeof(row.target_name));
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return row;
}

/* One integer of sql over the ledger, its parameters bound in order (text, then an integer). */
static long long ledger_int(const char *ledger, const char *sql, const char *text, long long num)
{
	sqlite3 *db = open_ro(ledger);
	sqlite3_stmt *st = NULL;
	long long n = -1;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		fail_msg("ledger: %s", sqlite3_errmsg(db));
	if (text) {
		sqlite3_bind_text(st, 1, text, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, num);
	}
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

long long tu_trust_ledger_records(const char *ledger, const char *source, long long after_id)
{
	return ledger_int(ledger, "SELECT count(*) FROM records WHERE source = ?1 AND id > ?2",
			  source, after_id);
}

long long tu_trust_ledger_last_id(const char *ledger)
{
	return ledger_int(ledger, "SELECT coalesce(max(id), 0) FROM records", NULL, 0);
}

static char fails[32768];
static size_t fails_len;

void tu_trust_check(bool ok, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (ok || fails_len + 4 >= sizeof(fails))
		return;
	memcpy(fails + fails_len, "\n- ", 3);
	fails_len += 3;
	va_start(ap, fmt);
	n = vsnprintf(fails + fails_len, sizeof(fails) - fails_len, fmt, ap);
	va_end(ap);
	if (n > 0)
		fails_len += (size_t)n < sizeof(fails) - fails_len ? (size_t)n
								   : sizeof(fails) - fails_len - 1;
}

void tu_trust_check_done(const char *what)
{
	if (!fails_len)
		return;
	fails[fails_len] = '\0';
	fails_len = 0;
	/* cmocka cuts a failure's message short: the list goes to stderr whole. */
	fprintf(stderr, "%s: what does not hold:%s\n", what, fails);
	fail_msg("%s: some points do not hold (listed above)", what);
}

const char *tu_trust_shown(const char *name, char *buf, size_t size)
{
	size_t j = 0;

	for (size_t i = 0; name[i] && j + 3 < size && i < 40; i++) {
		if (name[i] == '\n') {
			buf[j++] = '\\';
			buf[j++] = 'n';
		} else {
			buf[j++] = name[i];
		}
	}
	snprintf(buf + j, size - j, "%s", strlen(name) > 40 ? "..." : "");
	return buf;
}
