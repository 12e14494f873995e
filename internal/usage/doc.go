// Package usage keeps each uplink's traffic across restarts, counted as a
// carrier bills it: bytes on the wire (IP, UDP and QUIC) in both
// directions, per path and hour, and the byte count of each budget period.
//
// A Store is the embedded database (go.etcd.io/bbolt) in the file usage.db
// of the daemon's state directory: the period counter and lifetime totals
// of every path, and its hourly history, pruned after a retention. An
// Accountant samples the tunnel's cumulative per-path counters (about once
// a second), adds the differences to the current hour and budget period,
// feeds the budgets back to the scheduler, logs the 90 % and 100 %
// crossings, and writes everything to the Store every flush interval (at
// most 10 s) and when it is closed. Query and Write serve `bondd usage`.
//
// On the edge a path is one uplink (the bond is the edge's id); on the
// concentrator it is one path of one edge. docs/operations.md, "Budgets
// and usage", explains the counting method and the commands.
package usage
