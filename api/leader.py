"""This replica's hold on the leader lease: whether it may tick now, and at which epoch.

Exactly one replica ticks at a time. The lease lives in the database (api.store.leadership):
`hold` renews it, or takes it once it has run out, six times a period. Leading is judged
on this process's monotonic clock from the moment the renewal was *sent*, and ends at
`SAFE_SHARE` of the lease's length, so a leader that can no longer renew (its database
connection lost, the process paused) stops starting ticks before any other replica can
take the lease. A tick already running when that happens is still fenced: its write-back
commits only at its own epoch (api.store.tick_io.SqlTickIO.apply_tick).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid

from api.store.records import Store
from models.errors import SluiceError

log = logging.getLogger("sluice.leader")

LEASE_PERIODS = 0.75  # the lease's length in tick periods: a dead leader's runs out this soon
RENEWALS_PER_PERIOD = 6  # how often the lease is renewed (and followers try to take it)
SAFE_SHARE = 0.8  # of the lease, counted from the renewal's sending, this replica leads
MIN_LEASE_S = 0.5  # short periods still leave database round trips room


class Leadership:
    """Holds, renews and gives up the lease for one replica."""

    def __init__(self, store: Store, period_s: float) -> None:
        self.store = store
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.ttl_s = max(LEASE_PERIODS * period_s, MIN_LEASE_S)
        self.renew_every_s = self.ttl_s / LEASE_PERIODS / RENEWALS_PER_PERIOD
        self.epoch: int | None = None  # the epoch this replica last held the lease at
        self._leads_until = float("-inf")  # on time.monotonic()
        self._lock = threading.Lock()

    def current(self) -> int | None:
        """The epoch this replica leads at now, or None if it does not lead."""
        return self.epoch if time.monotonic() < self._leads_until else None

    def hold(self) -> int | None:
        """Renew the lease, or take it if it has run out (blocking); the epoch this replica
        now leads at, or None. A renewal that fails leaves the old deadline standing."""
        with self._lock:
            sent = time.monotonic()
            try:
                lease = self.store.hold_lease(self.holder, self.epoch, self.ttl_s)
            except SluiceError as error:
                log.warning("could not renew the leader lease: %s", error.message)
                return self.current()
            if lease.holder == self.holder:
                if lease.epoch != self.epoch:
                    log.info("this replica leads now, at epoch %d", lease.epoch)
                self.epoch = lease.epoch
                self._leads_until = sent + SAFE_SHARE * self.ttl_s
            else:
                if self.current() is not None:
                    log.warning("replica %s leads now, at epoch %d", lease.holder, lease.epoch)
                self._leads_until = float("-inf")
            return self.current()

    def lost(self) -> None:
        """A write at this replica's epoch was refused: another replica leads."""
        self._leads_until = float("-inf")

    def release(self) -> None:
        """Give the lease up at shutdown, so another replica need not wait for it to run out."""
        epoch = self.current()
        self._leads_until = float("-inf")
        if epoch is not None:
            try:
                self.store.release_lease(self.holder, epoch)
            except SluiceError as error:
                log.warning("could not release the leader lease: %s", error.message)
