// Package web serves bondd's read-only status page: the page itself
// (HTML, CSS and JavaScript embedded in the binary, no external resource)
// and one JSON stream of server-sent events built from the same
// status.Report as `bondd status --json`, once a second.
//
// An edge's page has one card per uplink with five minutes of charts, the
// bond, its rules and a list of events; a concentrator's page has a table
// of its edges (paged, filtered and sorted on the server, so the stream
// carries only the rows shown) and its BGP neighbours, and each edge opens
// the edge page. The stream's fields are documented in docs/operations.md,
// "The web page".
//
// The server is safe by default: GET only, a listener that is not
// loopback needs a token or TLS client certificates, a strict
// Content-Security-Policy, no caching of data, at most MaxViewers streams
// and a write deadline that drops a reader too slow to keep up. The sampler
// keeps five minutes of per-path history for at most maxDetailed bonds
// (all of them on an edge), so memory stays bounded at 1,000 edges.
package web
