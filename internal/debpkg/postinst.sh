#!/bin/sh
# bondd postinst: the system user the units run as, /etc/bondd readable by
# it, and the state directory /var/lib/bondd (the usage store) owned by it
# (docs/operations.md, "Install"). Services are not enabled: they need a
# config file first.
set -e
if [ "$1" = configure ]; then
	if ! getent passwd bondd >/dev/null; then
		adduser --system --group --no-create-home --home /nonexistent --quiet bondd
	fi
	chown root:bondd /etc/bondd
	chmod 0750 /etc/bondd
	mkdir -p /var/lib/bondd
	chown bondd:bondd /var/lib/bondd
	chmod 0750 /var/lib/bondd
	if [ -d /run/systemd/system ]; then
		systemctl daemon-reload >/dev/null || true
	fi
fi
exit 0
