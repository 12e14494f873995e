// Package bondd is the root of the bondd module: a userspace multipath
// bonding VPN. The code lives in the packages below it; this package holds
// only repository-wide tests (dependency direction, package docs, gofmt).
package bondd
