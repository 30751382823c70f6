#ifndef DRASYNC_TU_HTTP_H
#define DRASYNC_TU_HTTP_H

/* An HTTP client for the agents' metrics port (libcurl, after cmocka.h). */

typedef struct tu_http_reply {
	long code; /* 0: no answer */
	char *body;
	char *content_type; /* NULL when none */
	char *allow;	    /* the Allow header, NULL when none */
} tu_http_reply;

/** METHOD url (GET, HEAD, POST with a small body, ...); never fails the test itself. */
void tu_http(tu_http_reply *r, const char *method, const char *url);
void tu_http_dispose(tu_http_reply *r);

/** GET url; fails the test unless it answers `code`. Returns the body (caller frees). */
char *tu_http_get(const char *url, long code);

/**
 * Run `promtool check metrics` on text; fails the test with promtool's
 * words when it complains.
 */
void tu_promtool_check_metrics(const char *text);

#endif
