#ifndef DRASYNC_HTML_H
#define DRASYNC_HTML_H

/*
 * Server-rendered HTML, escaped: every value a page shows goes through
 * ds_html_escape(), so an object named "<script>" is text, never markup.
 */

#include "drasync/buf.h"

/**
 * Append s (NULL: nothing) with &, <, >, " and ' as character references,
 * safe both as element text and inside a quoted attribute. Bytes below 0x20
 * other than tab and newline are dropped. @return 0, or out's error
 */
int ds_html_escape(ds_str *out, const char *s);

/** ds_html_escape() of printf-style text. @return 0, or out's error */
int ds_html_escapef(ds_str *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
