"""A leader-election candidate for the e2e suite: the official ``kubernetes`` client's
LeaderElection over a coordination.k8s.io/v1 Lease. Prints ``leading <identity>`` (and
flushes) when it becomes the leader, then keeps renewing until it is killed.

Usage: ``python lease_elector.py <server URL> <namespace> <lease name> <identity>``."""

from __future__ import annotations

import sys
import threading

from kubernetes import client
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock


def main() -> None:
    server, namespace, name, identity = sys.argv[1:5]
    configuration = client.Configuration()
    configuration.host = server
    client.Configuration.set_default(configuration)
    stopped = threading.Event()

    def leading() -> None:
        print(f"leading {identity}", flush=True)

    # The client's leaderelection package has no type annotations.
    config = electionconfig.Config(  # type: ignore[no-untyped-call]
        LeaseLock(name, namespace, identity),  # type: ignore[no-untyped-call]
        lease_duration=4,
        renew_deadline=3,
        retry_period=1,
        onstarted_leading=leading,
        onstopped_leading=stopped.set,
    )
    elector = leaderelection.LeaderElection(config)  # type: ignore[no-untyped-call]
    elector.run()  # type: ignore[no-untyped-call]
    print(f"stopped {identity}", flush=True)


if __name__ == "__main__":
    main()
