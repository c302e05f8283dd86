# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""A plan's room and charges, compiled: the arithmetic every walk down the line repeats.

solver.placement.plan.Plan keeps what a tick has admitted and where; the numbers it
checks and changes for every action (each node's free room, the queues' use of their
caps, the fleet's free room per kind of pool, the clusters' loads) live in the arrays of a
RoomLedger, and the loops over them (best-fit's node search, the caps and limits, an
admission's room taken or given back) run here, in C, one action at a time or over a whole
stretch of the line (`walk_line`, `walk_decided`); so does the packing of an action's
neighbourhood (`Packer`, solver.placement.closure). The rules are those of
docs/engine/tick.md and docs/engine/exactness.md, kept number for number as the Python
that came before (D340); what changed is the cost of an action, from about a hundred
microseconds of numpy calls on arrays of a few dozen nodes to about one.

Units and names: room and requests are int64 in the problem's placement dimensions
(millicores, bytes, GPUs, then declared extras). Caps are compared by resource name, each
name given a small number once per process (`name_id`), so the rows that describe a list
of containers (UnitRows) or a demand (ChargeRows) are built once and shared by every plan
of a problem and of the problems changed from it (what explanations walk). A queue's use
is kept here as it counts against its caps, saturating at 2**61 (every cap is below it, so
no comparison changes, and a use and an amount add up without overflow); the exact amounts
a result reports stay with the Plan.
"""

import numpy as np

cimport cython
from cpython.mem cimport PyMem_Calloc, PyMem_Free, PyMem_Malloc
from libc.stdint cimport int64_t, uint8_t

cdef int64_t NO_NODE = 0x7FFFFFFFFFFFFFFF  # more room than any node has: never the tightest
SATURATED = 2**61  # a use saturates here: above every cap (UNBOUNDED is 2**61 - 1)
cdef int64_t SATURATION = SATURATED
cdef int64_t NO_CAP = -1
cdef Py_ssize_t CPU = 0, GPU = 2  # solver.placement.problem's CPU_DIM and GPU_DIM

# Why `refusal` says no: a code, then what its message needs (solver.placement.plan).
RUN_LIMIT = 1
ACTION_LIMIT = 2
CAP = 3

_NAMES: dict = {}  # resource name -> its number, for the life of the process
_NAMED: list = []  # and back


def name_id(name):
    """The number of a resource name ("" for pools without a device): the same in every
    problem, so compiled rows of one problem hold for the problems changed from it."""
    known = _NAMES.get(name)
    if known is None:
        known = _NAMES[name] = len(_NAMES)
        _NAMED.append(name)
    return known


def name_of(k):
    """The resource name of a number `name_id` gave."""
    return _NAMED[k]


def names_known():
    """How many names have a number so far."""
    return len(_NAMES)


cdef inline int64_t _saturated_add(int64_t a, int64_t b):
    cdef int64_t s = a + b
    if s > SATURATION:
        return SATURATION
    if s < -SATURATION:
        return -SATURATION
    return s


cdef class PoolChoice:
    """One shared `pools` mapping of containers (cluster -> compatible pools) as arrays: by
    cluster, and (`pools` whole) every compatible pool."""

    cdef readonly object mapping  # held, so its id stays its own
    cdef int64_t[::1] start  # per cluster, where its pools begin in `pools` (clusters + 1)
    cdef int64_t[::1] pools  # by cluster, each in the cluster's own order
    cdef readonly object lists  # per cluster, the mapping's own list (None where it has none)

    def __init__(self, mapping, Py_ssize_t clusters):
        self.mapping = mapping
        start = np.zeros(clusters + 1, dtype=np.int64)
        flat = []
        lists = [None] * clusters
        for c in range(clusters):
            start[c] = len(flat)
            pools = mapping.get(c)
            if pools is not None:
                lists[c] = pools
                flat.extend(pools)
        start[clusters] = len(flat)
        self.start = start
        self.pools = np.array(flat, dtype=np.int64)
        self.lists = lists


cdef class UnitRows:
    """One list of containers (an action's, or a reusable pool's replicas) as rows: what
    placing it reads, worked out once for the list (shared by every action of it). The rows
    are one block of C memory: a line has tens of thousands of lists, each built once per
    problem, so building one must cost little more than reading its containers."""

    cdef readonly object items  # held, so the list's id stays its own
    cdef Py_ssize_t n, dims, m
    cdef int64_t* block
    cdef int64_t* request  # (containers x dims), end to end: also the no-fit memory's row
    cdef int64_t* gpus
    cdef int64_t* untyped
    cdef int64_t* order  # best-fit's order: the most GPUs, then the most CPU, first
    cdef int64_t* need_name  # per kind of pool the containers are bound to: its name (m)
    cdef int64_t* need  # and their summed requests there (m x dims)
    cdef readonly list choices  # PoolChoice of each container
    cdef readonly tuple pool_key  # the containers' mappings by id: the no-fit memory's key
    cdef int64_t untyped_gpus

    def __cinit__(self, items, Py_ssize_t dims, Py_ssize_t clusters, dict choices):
        cdef Py_ssize_t n = len(items), i, j, d, at
        cdef const int64_t[::1] one
        cdef int64_t key
        self.items = items
        self.n = n
        self.dims = dims
        self.m = 0
        self.block = <int64_t*>PyMem_Calloc(
            n * dims + 4 * n + n * dims + 1, sizeof(int64_t)
        )
        if self.block == NULL:
            raise MemoryError()
        self.request = self.block
        self.gpus = self.request + n * dims
        self.untyped = self.gpus + n
        self.order = self.untyped + n
        self.need_name = self.order + n
        self.need = self.need_name + n
        self.choices = []
        self.untyped_gpus = 0
        for i in range(n):
            item = items[i]
            one = item.request
            for d in range(dims):
                self.request[i * dims + d] = one[d]
            self.gpus[i] = item.gpus
            self.untyped[i] = item.untyped
            choice = choices.get(id(item.pools))
            if choice is None or (<PoolChoice>choice).mapping is not item.pools:
                choice = choices[id(item.pools)] = PoolChoice(item.pools, clusters)
            self.choices.append(choice)
            if self.untyped[i]:
                self.untyped_gpus += self.gpus[i]
                continue
            key = name_id(item.device or "")
            at = self.m
            for j in range(self.m):
                if self.need_name[j] == key:
                    at = j
                    break
            if at == self.m:
                self.need_name[at] = key
                self.m += 1
            for d in range(dims):
                self.need[at * dims + d] += self.request[i * dims + d]
        # Insertion sort by (-GPUs, -CPU): stable, as Python's sort was.
        for i in range(n):
            j = i
            while j > 0 and _before(self, i, self.order[j - 1]):
                self.order[j] = self.order[j - 1]
                j -= 1
            self.order[j] = i
        self.pool_key = tuple([id(item.pools) for item in items])

    def __dealloc__(self):
        PyMem_Free(self.block)

    cdef object wanted(self):
        """The requests end to end, as a row of the no-fit memory."""
        return np.array([self.request[j] for j in range(self.n * self.dims)], dtype=np.int64)


cdef inline bint _before(UnitRows rows, Py_ssize_t a, Py_ssize_t b):
    """Whether container `a` goes before `b` in best-fit's order (more GPUs, then more CPU)."""
    if rows.gpus[a] != rows.gpus[b]:
        return rows.gpus[a] > rows.gpus[b]
    return rows.request[a * rows.dims + CPU] > rows.request[b * rows.dims + CPU]


cdef class ChargeRows:
    """A demand's nonzero amounts by name number, in the demand's order: the order in which
    a broken cap is reported."""

    cdef readonly object demand  # held, so its id stays its own
    cdef Py_ssize_t count
    cdef int64_t* name
    cdef int64_t* amount

    def __cinit__(self, demand):
        cdef Py_ssize_t e = 0
        self.demand = demand
        self.count = sum(1 for a in demand.values() if a)
        self.name = <int64_t*>PyMem_Malloc((2 * self.count + 1) * sizeof(int64_t))
        if self.name == NULL:
            raise MemoryError()
        self.amount = self.name + self.count
        for n, a in demand.items():
            if a:
                self.name[e] = name_id(n)
                self.amount[e] = min(a, SATURATION)
                e += 1

    def __dealloc__(self):
        PyMem_Free(self.name)


cdef class Rows:
    """The compiled rows of the lists, demands and pool mappings of one problem and the
    problems changed from it (rows depend only on the objects they are built from)."""

    cdef dict units
    cdef dict charges
    cdef dict choices
    cdef Py_ssize_t dims
    cdef Py_ssize_t clusters

    def __init__(self, Py_ssize_t dims, Py_ssize_t clusters):
        self.units = {}
        self.charges = {}
        self.choices = {}
        self.dims = dims
        self.clusters = clusters

    def fits(self, Py_ssize_t dims, Py_ssize_t clusters):
        """Whether these rows hold for a problem of so many dimensions and clusters."""
        return dims == self.dims and clusters == self.clusters

    cdef UnitRows unit(self, items):
        known = self.units.get(id(items))
        if known is None or (<UnitRows>known).items is not items:
            known = self.units[id(items)] = UnitRows(
                items, self.dims, self.clusters, self.choices
            )
        return <UnitRows>known

    cdef ChargeRows charge(self, demand):
        known = self.charges.get(id(demand))
        if known is None or (<ChargeRows>known).demand is not demand:
            known = self.charges[id(demand)] = ChargeRows(demand)
        return <ChargeRows>known


cdef class Fleet:
    """What one problem says of its pools, clusters and queues, as arrays (cheap to build:
    pools, clusters and queues number in the hundreds)."""

    cdef readonly Py_ssize_t dims, pools, clusters, queues, names
    cdef Py_ssize_t no_device  # the name number of "": the kind of pools without a device
    cdef int64_t[::1] node_start  # (pools + 1): each pool's first row of nodes
    cdef int64_t[::1] pool_cluster
    cdef int64_t[::1] pool_kind  # the name number of its device, or of "" without one
    cdef int64_t[:, ::1] declared  # (pools, dims): 1 where a node declares the dimension
    cdef int64_t[:, ::1] pool_room  # (pools, dims): one node's room
    cdef uint8_t[:, ::1] load_dim  # (clusters, dims): the dimensions a cluster's load reads
    cdef double[:, ::1] load_total  # and its full-scale room of each
    cdef int64_t[:, ::1] caps  # (queues, names): NO_CAP where the queue has none
    cdef int64_t[::1] run_limit  # NO_CAP without one
    cdef int64_t[::1] action_limit
    cdef int64_t[::1] running
    cdef uint8_t[::1] device  # per name number: a device's name (caps of devices)
    cdef uint8_t[::1] whole_nvidia  # per name number: a whole NVIDIA GPU model
    cdef uint8_t[::1] kind_present  # per name number: some pool of the fleet has that kind
    cdef uint8_t[::1] strict  # per queue: strict_fifo
    cdef uint8_t[::1] env_running  # per reusable environment: running before the tick
    cdef int64_t[:, ::1] base  # every node's room next to the running work alone
    cdef int64_t[::1] route_start  # (queues + 1): each queue's clusters in `route`
    cdef int64_t[::1] route
    cdef readonly Rows rows

    def __init__(self, problem, Rows rows, is_device, is_whole_nvidia):
        """`is_device` and `is_whole_nvidia` tell a resource name's kind (models.resources)."""
        cdef Py_ssize_t p, q
        self.rows = rows
        pools = problem.pools
        self.dims = len(problem.dims)
        self.pools = len(pools)
        self.clusters = len(problem.cluster_names)
        self.queues = len(problem.queues)
        self.no_device = name_id("")
        for pool in pools:
            name_id(pool.device or "")
        for queue in problem.queues:
            for name in queue.caps:
                name_id(name)
        self.names = names_known()
        start = np.zeros(self.pools + 1, dtype=np.int64)
        for p, pool in enumerate(pools):
            start[p + 1] = start[p] + pool.max_nodes
        self.node_start = start
        self.pool_cluster = np.array([pool.cluster for pool in pools], dtype=np.int64)
        self.pool_kind = np.array([name_id(pool.device or "") for pool in pools], dtype=np.int64)
        self.declared = np.ascontiguousarray(problem.pool_declared(), dtype=np.int64).reshape(
            self.pools, self.dims
        )
        self.pool_room = np.array(
            [pool.room for pool in pools], dtype=np.int64
        ).reshape(self.pools, self.dims)
        room = np.asarray(problem.cluster_room, dtype=np.float64).reshape(self.clusters, self.dims)
        self.load_dim = (room > 0).astype(np.uint8)
        self.load_total = np.ascontiguousarray(room)
        caps = np.full((self.queues, self.names), NO_CAP, dtype=np.int64)
        for q, queue in enumerate(problem.queues):
            for name, cap in queue.caps.items():
                caps[q, name_id(name)] = cap
        self.caps = caps
        self.run_limit = np.array(
            [NO_CAP if qi.run_concurrency is None else qi.run_concurrency for qi in problem.queues],
            dtype=np.int64,
        )
        self.action_limit = np.array(
            [
                NO_CAP if qi.action_concurrency is None else qi.action_concurrency
                for qi in problem.queues
            ],
            dtype=np.int64,
        )
        self.running = np.array([qi.running for qi in problem.queues], dtype=np.int64)
        self.strict = np.array([qi.strict for qi in problem.queues], dtype=np.uint8)
        self.env_running = np.array([e.running for e in problem.envs], dtype=np.uint8)
        routes = [qi.clusters for qi in problem.queues]
        self.route_start = np.cumsum([0, *map(len, routes)], dtype=np.int64)
        self.route = np.array([c for r in routes for c in r], dtype=np.int64)
        self.base = np.ascontiguousarray(
            np.concatenate([pool.room - pool.used for pool in pools])
            if pools else np.zeros((0, self.dims)),
            dtype=np.int64,
        )
        flags = np.zeros((3, self.names), dtype=np.uint8)
        for name, k in _NAMES.items():
            if k < self.names:
                flags[0, k] = is_device(name)
                flags[1, k] = is_whole_nvidia(name)
        for pool in pools:
            flags[2, name_id(pool.device or "")] = 1
        self.device = flags[0]
        self.whole_nvidia = flags[1]
        self.kind_present = flags[2]


    cdef bint _may_fit(self, Py_ssize_t queue, UnitRows rows):
        """Whether some cluster of the queue has, for each container, a node with room for it
        next to the running work alone: a necessary bound (Decider._may_fit)."""
        cdef Py_ssize_t r, c, i, j, p, row, d
        cdef PoolChoice choice
        cdef bint found
        for r in range(self.route_start[queue], self.route_start[queue + 1]):
            c = self.route[r]
            for i in range(rows.n):
                choice = <PoolChoice>rows.choices[i]
                found = False
                for j in range(choice.start[c], choice.start[c + 1]):
                    p = choice.pools[j]
                    for row in range(self.node_start[p], self.node_start[p + 1]):
                        found = True
                        for d in range(self.dims):
                            if self.base[row, d] < rows.request[i * rows.dims + d]:
                                found = False
                                break
                        if found:
                            break
                    if found:
                        break
                if not found:
                    break
            else:
                return True
        return False

    def fits_base_room(self, const int64_t[::1] request, pools):
        """Whether some node of `pools` has room for `request` next to running work alone."""
        cdef Py_ssize_t row, d
        cdef bint fits
        cdef Py_ssize_t p
        for p in pools:
            for row in range(self.node_start[p], self.node_start[p + 1]):
                fits = True
                for d in range(self.dims):
                    if self.base[row, d] < request[d]:
                        fits = False
                        break
                if fits:
                    return True
        return False


cdef class RoomLedger:
    """The numbers of one plan: each node's free room, the queues' use of their caps, the
    fleet's free room per kind of pool, the clusters' loads; and the loops over them.

    The arrays are numpy arrays the Plan reads too (`free_rows`, `opened_rows`, ...): one
    state, two readers. `fork` copies them all.
    """

    cdef readonly Fleet fleet
    cdef readonly bint first_fit
    cdef readonly object free_rows, opened_rows, max_free, room_returns, cluster_used
    cdef readonly object loads, kind_free, untyped_on, held, untyped_landed, admitted
    cdef readonly object env_started  # per reusable environment: started by this tick
    cdef int64_t[:, ::1] free
    cdef uint8_t[::1] opened
    cdef int64_t[:, ::1] mfree
    cdef int64_t[::1] returns
    cdef double[:, ::1] cused
    cdef double[::1] load
    cdef double[:, ::1] kfree
    cdef int64_t[::1] uon
    cdef int64_t[:, ::1] use
    cdef int64_t[:, ::1] landed
    cdef int64_t[::1] count
    cdef uint8_t[::1] started
    cdef readonly dict no_fit  # (queue, pool key) -> rows of requests best-fit found no room for
    cdef dict landing_order  # id(pools) -> (pools, the order untyped containers try them)
    cdef readonly object landing  # solver.placement.landing.LandingOrder
    cdef int64_t max_memory
    # Scratch rows of one placement, sized for the largest unit met so far.
    cdef uint8_t[:, ::1] roomy
    cdef int64_t[::1] reach
    cdef int64_t[::1] order_of  # the clusters a placement tries, in order
    cdef int64_t[::1] extra
    cdef int64_t[::1] spot_pool
    cdef int64_t[::1] spot_node

    def __init__(
        self, Fleet fleet, bint first_fit, free_rows, opened_rows, cluster_used, kind_free,
        held, landing, Py_ssize_t no_fit_memory
    ):
        """A ledger over arrays the caller made (`free_rows`: every node's free room, pools
        end to end; `opened_rows`: whether each node is up or opened by this tick;
        `cluster_used` and `kind_free` as Plan counts them; `held`: each queue's use by name
        number, saturated)."""
        cdef Py_ssize_t p
        self.fleet = fleet
        self.first_fit = first_fit
        self.free_rows = free_rows
        self.opened_rows = opened_rows
        self.cluster_used = cluster_used
        self.kind_free = kind_free
        self.held = held
        self.landing = landing
        self.max_memory = no_fit_memory
        self.free = free_rows
        self.opened = opened_rows.view(np.uint8)
        self.cused = cluster_used
        self.kfree = kind_free
        self.use = held
        self.max_free = np.zeros((fleet.pools, fleet.dims), dtype=np.int64)
        self.mfree = self.max_free
        for p in range(fleet.pools):
            self._refresh_max(p)
        self.room_returns = np.zeros(fleet.pools, dtype=np.int64)
        self.returns = self.room_returns
        self.loads = np.zeros(fleet.clusters, dtype=np.float64)
        self.load = self.loads
        for c in range(fleet.clusters):
            self._update_load(c)
        self.untyped_on = np.zeros(fleet.names, dtype=np.int64)
        self.uon = self.untyped_on
        self.untyped_landed = np.zeros((fleet.queues, fleet.names), dtype=np.int64)
        self.landed = self.untyped_landed
        self.admitted = np.zeros(fleet.queues, dtype=np.int64)
        self.count = self.admitted
        self.env_started = np.zeros(fleet.env_running.shape[0], dtype=np.uint8)
        self.started = self.env_started
        self.no_fit = {}
        self.landing_order = {}
        self._size_scratch(4)

    cpdef RoomLedger fork(self, landing=None):
        """A copy whose arrays are its own (the memories of failed requests are shared until
        either side adds to them: their arrays are replaced, never written)."""
        cdef RoomLedger new = RoomLedger.__new__(RoomLedger)
        new.fleet = self.fleet
        new.first_fit = self.first_fit
        new.free_rows = self.free_rows.copy()
        new.opened_rows = self.opened_rows.copy()
        new.cluster_used = self.cluster_used.copy()
        new.kind_free = self.kind_free.copy()
        new.held = self.held.copy()
        new.max_free = self.max_free.copy()
        new.room_returns = self.room_returns.copy()
        new.loads = self.loads.copy()
        new.untyped_on = self.untyped_on.copy()
        new.untyped_landed = self.untyped_landed.copy()
        new.admitted = self.admitted.copy()
        new.env_started = self.env_started.copy()
        new.free = new.free_rows
        new.opened = new.opened_rows.view(np.uint8)
        new.cused = new.cluster_used
        new.kfree = new.kind_free
        new.use = new.held
        new.mfree = new.max_free
        new.returns = new.room_returns
        new.load = new.loads
        new.uon = new.untyped_on
        new.landed = new.untyped_landed
        new.count = new.admitted
        new.started = new.env_started
        new.no_fit = dict(self.no_fit)
        new.max_memory = self.max_memory
        if landing is None or landing is self.landing:
            new.landing = self.landing
            new.landing_order = self.landing_order
        else:
            new.landing = landing
            new.landing_order = {}
        new._size_scratch(self.roomy.shape[0])
        return new

    cdef void _size_scratch(self, Py_ssize_t containers):
        self.roomy = np.zeros((containers, max(self.fleet.pools, 1)), dtype=np.uint8)
        self.reach = np.zeros(max(self.fleet.clusters, 1), dtype=np.int64)
        self.order_of = np.zeros(max(self.fleet.clusters, 1), dtype=np.int64)
        self.extra = np.zeros(max(self.fleet.names, 1), dtype=np.int64)
        self.spot_pool = np.zeros(containers, dtype=np.int64)
        self.spot_node = np.zeros(containers, dtype=np.int64)

    def unit(self, items):
        """The rows of a list of containers (built once for the list)."""
        return self.fleet.rows.unit(items)

    # -- caps and limits ----------------------------------------------------------------

    def refusal(self, Py_ssize_t queue, run, set runs, demand, bint device_caps=True):
        """The first limit or cap admitting a unit of `demand` for `run` breaks now:
        None, or (RUN_LIMIT, runs active), (ACTION_LIMIT, actions in flight) or (CAP, name
        number, the queue's use of it)."""
        return self._refusal(queue, run, runs, self.fleet.rows.charge(demand), device_caps)

    cdef object _refusal(
        self, Py_ssize_t queue, run, set runs, ChargeRows charge, bint device_caps=True
    ):
        cdef Fleet fleet = self.fleet
        cdef int64_t limit = fleet.run_limit[queue]
        if limit != NO_CAP and <int64_t>len(runs) >= limit and run not in runs:
            return (RUN_LIMIT, len(runs))
        cdef int64_t in_flight = fleet.running[queue] + self.count[queue]
        limit = fleet.action_limit[queue]
        if limit != NO_CAP and in_flight >= limit:
            return (ACTION_LIMIT, in_flight)
        return self._cap_refusal(queue, charge, device_caps)

    def cap_refusal(self, Py_ssize_t queue, demand, bint device_caps=True):
        """The first cap a unit of `demand` breaks: None or (CAP, name number, use)."""
        return self._cap_refusal(queue, self.fleet.rows.charge(demand), device_caps)

    cdef object _cap_refusal(self, Py_ssize_t queue, ChargeRows charge, bint device_caps):
        cdef Fleet fleet = self.fleet
        cdef Py_ssize_t e, k
        cdef int64_t cap
        for e in range(charge.count):
            k = charge.name[e]
            if k >= fleet.names:
                continue  # a name no queue of this problem caps
            cap = fleet.caps[queue, k]
            if cap == NO_CAP or (not device_caps and fleet.device[k]):
                continue
            if self.use[queue, k] + charge.amount[e] > cap:
                return (CAP, k, self.use[queue, k])
        return None

    def untyped_landed_on(self, Py_ssize_t queue, device):
        """Untyped GPUs of `queue` this tick's placements landed on `device`."""
        cdef Py_ssize_t k = name_id(device)
        return int(self.landed[queue, k]) if k < self.fleet.names else 0

    # -- the fleet's room ---------------------------------------------------------------

    def fleet_may_hold(self, items):
        """A bound no repacking can beat: the fleet's free room of each kind of pool (work
        on a device's pools stays on that device's, but untyped GPUs, which may move to any
        whole NVIDIA model; CPU-only work stays on pools without one)."""
        return self._fleet_may_hold(self.fleet.rows.unit(items))

    cdef bint _fleet_may_hold(self, UnitRows rows):
        cdef Fleet fleet = self.fleet
        cdef Py_ssize_t m, k, d
        cdef double nvidia
        for m in range(rows.m):
            k = rows.need_name[m]
            if k >= fleet.names or not fleet.kind_present[k]:
                return False
            if k != fleet.no_device:
                if <double>rows.need[m * rows.dims + GPU] > self.kfree[k, GPU] + <double>self.uon[k]:
                    return False
            else:
                for d in range(fleet.dims):
                    if <double>rows.need[m * rows.dims + d] > self.kfree[k, d]:
                        return False
        if rows.untyped_gpus:
            nvidia = 0.0
            for k in range(fleet.names):
                if fleet.whole_nvidia[k] and fleet.kind_present[k]:
                    nvidia += self.kfree[k, GPU]
            if <double>rows.untyped_gpus > nvidia:
                return False
        return True

    # -- best-fit -----------------------------------------------------------------------

    def find_placement(self, Py_ssize_t queue, items, demand):
        """Best-fit of a unit's containers, unless a request no larger on the same pools
        already found no room (remembered until room comes back): (cluster, pools, nodes)
        or None. `demand` is what the unit adds to its queue's device caps besides the
        untyped GPUs it lands."""
        return self._find_placement(
            queue, self.fleet.rows.unit(items), self.fleet.rows.charge(demand)
        )

    cdef object _find_placement(self, Py_ssize_t queue, UnitRows rows, ChargeRows charge):
        if self._remembered_no_fit(queue, rows):
            return None
        found = self._best_placement(queue, rows, charge)
        if found is None:
            self._remember_no_fit(queue, rows)
        return found

    def best_placement(self, Py_ssize_t queue, items, demand):
        """Best-fit of a unit's containers on the room left now, not asking the memory of
        requests that found none: (cluster, pools, nodes) or None."""
        return self._best_placement(
            queue, self.fleet.rows.unit(items), self.fleet.rows.charge(demand)
        )

    cdef bint _remembered_no_fit(self, Py_ssize_t queue, UnitRows rows):
        failed = self.no_fit.get((queue, rows.pool_key))
        if failed is None:
            return False
        cdef int64_t[:, ::1] known = failed
        cdef Py_ssize_t r, j
        cdef bint covered
        for r in range(known.shape[0]):
            covered = True
            for j in range(rows.n * rows.dims):
                if known[r, j] > rows.request[j]:
                    covered = False
                    break
            if covered:
                return True
        return False

    cdef void _remember_no_fit(self, Py_ssize_t queue, UnitRows rows):
        key = (queue, rows.pool_key)
        failed = self.no_fit.get(key)
        wanted = rows.wanted()[None, :]
        if failed is None:
            self.no_fit[key] = np.ascontiguousarray(wanted)
        elif failed.shape[0] < self.max_memory:
            self.no_fit[key] = np.ascontiguousarray(np.vstack([failed, wanted]))

    cdef object _best_placement(self, Py_ssize_t queue, UnitRows rows, ChargeRows charge):
        cdef Fleet fleet = self.fleet
        cdef Py_ssize_t i, j, p, d, c, n = rows.n, count = 0, k
        cdef bint fits
        cdef PoolChoice choice
        if n > self.roomy.shape[0]:
            self._size_scratch(n)
        # Pools with a node big enough for each container (by max_free), and the clusters
        # where every container has one: a cheap first cut.
        for c in range(fleet.clusters):
            self.reach[c] = 0
        for i in range(n):
            choice = <PoolChoice>rows.choices[i]
            for j in range(choice.start[fleet.clusters]):
                p = choice.pools[j]
                fits = True
                for d in range(fleet.dims):
                    if self.mfree[p, d] < rows.request[i * rows.dims + d]:
                        fits = False
                        break
                self.roomy[i, p] = fits
                if fits:
                    c = fleet.pool_cluster[p]
                    if self.reach[c] == i:
                        self.reach[c] = i + 1
        # Those clusters, the least loaded first (in order with first-fit), by insertion.
        for c in range(fleet.clusters):
            if self.reach[c] != n:
                continue
            k = count
            while k > 0 and not self.first_fit and (
                self.load[c] < self.load[self.order_of[k - 1]]
            ):
                self.order_of[k] = self.order_of[k - 1]
                k -= 1
            self.order_of[k] = c
            count += 1
        found = None
        for k in range(count):
            found = self._fit_in_cluster(queue, rows, charge, self.order_of[k])
            if found is not None:
                break
        for i in range(n):
            choice = <PoolChoice>rows.choices[i]
            for j in range(choice.start[fleet.clusters]):
                self.roomy[i, choice.pools[j]] = 0
        return found

    cdef object _fit_in_cluster(
        self, Py_ssize_t queue, UnitRows rows, ChargeRows charge, Py_ssize_t cluster
    ):
        """Each container on a node of its pools in `cluster` (only among its roomy pools),
        the others' room held while the next is placed."""
        cdef Fleet fleet = self.fleet
        cdef Py_ssize_t n = rows.n, k, i, e, j, p = -1, d, row, placed = 0, kind
        cdef int64_t[::1] pools
        cdef int64_t slot, cap
        cdef PoolChoice choice
        cdef bint ok = True
        # An untyped container landing on a capped device shares the cap with the unit's own
        # typed request for it.
        for e in range(charge.count):
            if charge.name[e] < fleet.names:
                self.extra[charge.name[e]] += charge.amount[e]
        for k in range(n):
            i = k if self.first_fit else rows.order[k]
            choice = <PoolChoice>rows.choices[i]
            if rows.untyped[i] and not self.first_fit:
                pools = self._landing(choice, cluster)
            else:
                pools = choice.pools[choice.start[cluster] : choice.start[cluster + 1]]
            slot = -1
            for j in range(pools.shape[0]):
                p = pools[j]
                if not self.roomy[i, p]:
                    continue
                kind = fleet.pool_kind[p]
                if rows.untyped[i] and kind != fleet.no_device:
                    cap = fleet.caps[queue, kind]
                    if cap != NO_CAP and self.use[queue, kind] + self.extra[kind] + rows.gpus[i] > cap:
                        continue
                slot = self._best_node(p, rows, i)
                if slot >= 0:
                    break
            if slot < 0:
                ok = False
                break
            self.spot_pool[i] = p
            self.spot_node[i] = slot
            placed += 1
            if k < n - 1:  # held while the unit's other containers are placed
                row = fleet.node_start[p] + slot
                for d in range(fleet.dims):
                    self.free[row, d] -= rows.request[(i) * rows.dims + d]
            kind = fleet.pool_kind[p]
            if rows.untyped[i] and kind != fleet.no_device and fleet.caps[queue, kind] != NO_CAP:
                self.extra[kind] += rows.gpus[i]
        for k in range(min(placed, n - 1)):
            i = k if self.first_fit else rows.order[k]
            p = self.spot_pool[i]
            row = fleet.node_start[p] + self.spot_node[i]
            for d in range(fleet.dims):
                self.free[row, d] += rows.request[(i) * rows.dims + d]
            self.returns[p] += 1
        for k in range(fleet.names):
            self.extra[k] = 0
        if not ok:
            return None
        return (
            cluster,
            [int(self.spot_pool[i]) for i in range(n)],
            [int(self.spot_node[i]) for i in range(n)],
        )

    cdef int64_t[::1] _landing(self, PoolChoice choice, Py_ssize_t cluster):
        """An untyped container's pools of `cluster`, in the order it tries them."""
        pools = choice.lists[cluster]
        if pools is None:
            return choice.pools[0:0]
        known = self.landing_order.get(id(pools))
        if known is None or known[0] is not pools:
            known = self.landing_order[id(pools)] = (
                pools, np.array(self.landing.order(pools), dtype=np.int64)
            )
        return known[1]

    cdef int64_t _best_node(self, Py_ssize_t p, UnitRows rows, Py_ssize_t i):
        """The open node the request fills most tightly, else the first fresh node with
        room (the lowest index among equals); -1 when no node has room."""
        cdef Fleet fleet = self.fleet
        cdef Py_ssize_t start = fleet.node_start[p], stop = fleet.node_start[p + 1]
        cdef Py_ssize_t row, d
        cdef Py_ssize_t dim = GPU if rows.request[(i) * rows.dims + GPU] else CPU
        cdef int64_t first = -1, tightest = -1, least = NO_NODE
        cdef bint fits
        for row in range(start, stop):
            fits = True
            for d in range(fleet.dims):
                if self.free[row, d] < rows.request[(i) * rows.dims + d]:
                    fits = False
                    break
            if not fits:
                continue
            if first < 0:
                first = row - start
                if self.first_fit:
                    return first
            if self.opened[row] and self.free[row, dim] < least:
                least = self.free[row, dim]
                tightest = row - start
        return tightest if tightest >= 0 else first

    # -- taking and giving back ---------------------------------------------------------

    def admit(self, Py_ssize_t queue, run, set runs, items, demand, spots, env, bint take):
        """Count an admission: its demand and a slot in its queue, its run, the untyped GPUs
        it lands (at `spots`, one (pool, node) a container, when placed), its room (with
        `take`; else Plan.settle takes it later), and the reusable pool it starts (`env`, or
        None)."""
        cdef UnitRows rows = None
        cdef Py_ssize_t i
        if spots is not None:
            rows = self.fleet.rows.unit(items)
            if rows.n > self.spot_pool.shape[0]:
                self._size_scratch(rows.n)
            for i in range(rows.n):
                self.spot_pool[i], self.spot_node[i] = spots[i]
        self._admit(queue, run, runs, rows, self.fleet.rows.charge(demand), -1 if env is None else env)
        if rows is not None and take:
            self._take_rows(rows, +1, True)

    cdef void _admit(
        self, Py_ssize_t queue, run, set runs, UnitRows rows, ChargeRows charge, Py_ssize_t env
    ):
        """The numbers of an admission but its room (the spots are the scratch rows')."""
        self._charge(queue, charge, +1)
        runs.add(run)
        if rows is not None:
            self._land_rows(queue, rows, +1)
        if env >= 0:
            self.started[env] = 1

    def charge(self, Py_ssize_t queue, demand, int sign):
        """Count (sign +1) or give back (-1) a unit's demand in its queue's use, and the
        unit in its queue's admissions."""
        self._charge(queue, self.fleet.rows.charge(demand), sign)

    cdef void _charge(self, Py_ssize_t queue, ChargeRows rows, int sign):
        cdef Py_ssize_t e, k
        for e in range(rows.count):
            k = rows.name[e]
            if k < self.fleet.names:
                self.use[queue, k] = _saturated_add(self.use[queue, k], sign * rows.amount[e])
        self.count[queue] += sign

    def land(self, Py_ssize_t queue, items, pools, int sign):
        """Charge (+1) or give back (-1) the untyped GPUs of `items`, on the pools they sit
        in, to their devices: device caps count them."""
        cdef UnitRows rows = self.fleet.rows.unit(items)
        self._set_spots(rows, pools, None)
        self._land_rows(queue, rows, sign)

    cdef void _land_rows(self, Py_ssize_t queue, UnitRows rows, int sign):
        cdef Py_ssize_t i, kind
        for i in range(rows.n):
            if not rows.untyped[i]:
                continue
            kind = self.fleet.pool_kind[self.spot_pool[i]]
            if kind != self.fleet.no_device:
                self.use[queue, kind] = _saturated_add(self.use[queue, kind], sign * rows.gpus[i])
                self.landed[queue, kind] += sign * rows.gpus[i]
                self.uon[kind] += sign * rows.gpus[i]

    def take_room(self, items, pools, nodes, int sign, bint refresh):
        """Take (+1) or give back (-1) the room of `items` at their nodes, with what the
        clusters and kinds of pool count of it; with `refresh`, the largest room of their
        pools and the loads of their clusters too (else the caller's `refresh` does it)."""
        cdef UnitRows rows = self.fleet.rows.unit(items)
        self._set_spots(rows, pools, nodes)
        self._take_rows(rows, sign, refresh)

    cdef void _take_rows(self, UnitRows rows, int sign, bint refresh):
        cdef Fleet fleet = self.fleet
        cdef Py_ssize_t i, d, p, row, c, kind
        cdef int64_t held
        for i in range(rows.n):
            p = self.spot_pool[i]
            row = fleet.node_start[p] + self.spot_node[i]
            c = fleet.pool_cluster[p]
            kind = fleet.pool_kind[p]
            for d in range(fleet.dims):
                held = rows.request[(i) * rows.dims + d] * fleet.declared[p, d]
                self.free[row, d] -= sign * rows.request[(i) * rows.dims + d]
                self.cused[c, d] += <double>(sign * held)
                self.kfree[kind, d] -= <double>(sign * held)
            if sign > 0:
                self.opened[row] = 1
            else:
                self.returns[p] += 1
        if sign < 0:
            self.no_fit.clear()  # room came back: what failed may fit now
        if refresh:
            for i in range(rows.n):
                self._update_load(fleet.pool_cluster[self.spot_pool[i]])
                self._refresh_max(self.spot_pool[i])

    def hold(self, items, pools, nodes, int sign):
        """Take (+1) or give back (-1) the nodes' room of `items` and nothing else: a trial
        placement (solver.placement.repair), undone by the opposite sign."""
        cdef UnitRows rows = self.fleet.rows.unit(items)
        cdef Py_ssize_t i, d, p, row
        self._set_spots(rows, pools, nodes)
        for i in range(rows.n):
            p = self.spot_pool[i]
            row = self.fleet.node_start[p] + self.spot_node[i]
            for d in range(self.fleet.dims):
                self.free[row, d] -= sign * rows.request[(i) * rows.dims + d]
            if sign < 0:
                self.returns[p] += 1
        for i in range(rows.n):
            self._refresh_max(self.spot_pool[i])

    cdef void _set_spots(self, UnitRows rows, pools, nodes):
        """The scratch rows of a placement given from Python: each container's pool, and its
        node (`nodes` None: only the pools are read)."""
        cdef Py_ssize_t i
        if rows.n > self.spot_pool.shape[0]:
            self._size_scratch(rows.n)
        for i in range(rows.n):
            self.spot_pool[i] = pools[i]
            if nodes is not None:
                self.spot_node[i] = nodes[i]

    # -- a stretch of the line ----------------------------------------------------------

    cdef tuple _unit_of(self, action, envs, empty):
        """What admitting `action` places and charges, and the reusable environment it
        starts (-1: none): its own containers; the replicas of the pool it starts; or
        nothing, where that pool runs already (before the tick, or started by it)."""
        cdef Py_ssize_t env = -1 if action.env is None else action.env
        if env < 0:
            return action.items, action.demand, -1
        if not self.fleet.env_running[env] and not self.started[env]:
            return envs[env].items, envs[env].demand, env
        return [], empty, -1

    def walk_line(self, actions, envs, runs_of, failures, over_depth, outcome, words, empty):
        """The best-fit pass (solver.placement.best_fit) over `actions`, in order: each is
        refused for depth, for its strict head, for a limit or a cap, or for no room in the
        fleet, admitted where best-fit finds room, or else refused for room and contested.

        Refusals, contested actions and heads go into `outcome` (PassVerdicts), in the words
        `words` gives (best_fit.PassWords); returns the admissions, in order, as (action,
        placement found or None) for the Plan to record who sits where.
        """
        cdef Py_ssize_t i, q, starting
        cdef UnitRows rows
        cdef ChargeRows charge
        refusals = outcome.refusals
        contested = outcome.contested
        heads = outcome.heads
        admitted = []
        for action in actions:
            i = action.index
            if i in failures:
                continue
            q = action.queue
            if i in over_depth:
                refusals[i] = words.depth(q)
                continue
            head = heads.get(q)
            if head is not None:
                refusals[i] = words.behind(head)
                continue
            items, demand, starting = self._unit_of(action, envs, empty)
            charge = self.fleet.rows.charge(demand)
            runs = runs_of[q]
            found = self._refusal(q, action.run, runs, charge)
            if found is None:
                if not items:
                    self._admit(q, action.run, runs, None, charge, starting)
                    admitted.append((action, None))
                    continue
                rows = self.fleet.rows.unit(items)
                if not self._fleet_may_hold(rows):
                    refusal = words.no_room  # proven: no repacking makes the room
                else:
                    placement = self._find_placement(q, rows, charge)
                    if placement is not None:
                        self._admit(q, action.run, runs, rows, charge, starting)
                        self._take_rows(rows, +1, True)
                        admitted.append((action, placement))
                        continue
                    refusal = words.no_room
                    contested.append(i)
            else:
                refusal = words.refusal(q, found, demand)
                if found[0] == CAP and self.landed[q, <Py_ssize_t>found[1]] > 0:
                    # A device cap charged by untyped GPUs placed this tick may clear if
                    # they move elsewhere.
                    contested.append(i)
            refusals[i] = refusal
            if self.fleet.strict[q]:
                heads[q] = i
        return admitted

    def walk_decided(
        self, actions, Py_ssize_t start, Py_ssize_t stop, envs, runs_of, members, refusals,
        heads, shapes, words, empty, out_of_time, kept=None
    ):
        """The decide walk (solver.placement.decide) from position `start`, as far as its
        verdicts need nothing but caps, limits and best-fit: each member is refused behind
        its strict head, for a limit or a cap, or for no room in the fleet, or admitted where
        best-fit finds room. Returns (the position of the first action that needs more, or
        len(actions); the admissions so far, as walk_line gives them). Needing more: best-fit
        found no room, only a device cap untyped GPUs placed this tick charge refuses it
        (they may move), or a refusal for room of its shape was remembered (`shapes`).
        With `out_of_time` (the refusal for the time limit: given once the tick's checks
        have run out of it), an action best-fit found no room for is refused with it where
        the fleet, emptied of this tick's work, could hold it (where not, the refusal is a
        proof, which the Decider records). It walks up to position `stop` (not included).
        With `kept` (a resumed walk: solver.placement.resume), a member of `kept` it would
        refuse needs more too, as does a member not of `kept` it would admit: the walk's
        own hand records what it displaces and what it lets in."""
        cdef Py_ssize_t pos, i, q, starting
        cdef bint displaces, lets_in
        cdef UnitRows rows
        cdef ChargeRows charge
        admitted = []
        for pos in range(start, stop):
            action = actions[pos]
            i = action.index
            q = action.queue
            if i not in members:
                if self.fleet.strict[q] and i in refusals:
                    heads.setdefault(q, i)
                continue
            # In a resumed walk, refusing one of the tick's admissions, or admitting any
            # other action, is a turn of the walk's own.
            displaces = kept is not None and i in kept
            lets_in = kept is not None and not displaces
            head = heads.get(q)
            if head is not None:
                if displaces:
                    return pos, admitted
                refusals[i] = words.behind(head)
                continue
            items, demand, starting = self._unit_of(action, envs, empty)
            charge = self.fleet.rows.charge(demand)
            runs = runs_of[q]
            found = self._refusal(q, action.run, runs, charge)
            if found is not None:
                if found[0] == CAP and self.landed[q, <Py_ssize_t>found[1]] > 0:
                    return pos, admitted
                if displaces:
                    return pos, admitted
                refusals[i] = words.refusal(q, found, demand)
                if self.fleet.strict[q]:
                    heads.setdefault(q, i)
                continue
            if not items:
                if lets_in:
                    return pos, admitted
                refusals.pop(i, None)
                self._admit(q, action.run, runs, None, charge, starting)
                admitted.append((action, None))
                continue
            if shapes.find(q, items) is not None:
                return pos, admitted
            rows = self.fleet.rows.unit(items)
            if not self._fleet_may_hold(rows):
                if displaces:
                    return pos, admitted
                refusals[i] = words.no_room
                if self.fleet.strict[q]:
                    heads.setdefault(q, i)
                continue
            placement = self._find_placement(q, rows, charge)
            if placement is None:
                if displaces or out_of_time is None or not self.fleet._may_fit(q, rows):
                    return pos, admitted
                refusals[i] = out_of_time
                if self.fleet.strict[q]:
                    heads.setdefault(q, i)
                continue
            if lets_in:
                return pos, admitted
            refusals.pop(i, None)
            self._admit(q, action.run, runs, rows, charge, starting)
            self._take_rows(rows, +1, True)
            admitted.append((action, placement))
        return stop, admitted

    def refresh(self, pools, clusters):
        """Work out again the largest room of `pools` and the loads of `clusters`, after
        their rows were changed from Python (Plan.settle)."""
        for p in pools:
            self._refresh_max(p)
        for c in clusters:
            self._update_load(c)

    cdef void _refresh_max(self, Py_ssize_t p):
        cdef Fleet fleet = self.fleet
        cdef Py_ssize_t row, d, start = fleet.node_start[p], stop = fleet.node_start[p + 1]
        cdef int64_t best
        for d in range(fleet.dims):
            best = 0  # as numpy's max of an empty pool's rows would be, had it any
            if stop > start:
                best = self.free[start, d]
                for row in range(start + 1, stop):
                    if self.free[row, d] > best:
                        best = self.free[row, d]
            self.mfree[p, d] = best

    cdef void _update_load(self, Py_ssize_t cluster):
        """Share of the cluster's full-scale room in use, on its scarcest dimension."""
        cdef Fleet fleet = self.fleet
        cdef Py_ssize_t d
        cdef double share, most = 0.0
        cdef bint any_dim = False
        for d in range(fleet.dims):
            if fleet.load_dim[cluster, d]:
                share = self.cused[cluster, d] / fleet.load_total[cluster, d]
                if not any_dim or share > most:
                    most = share
                any_dim = True
        if any_dim:
            self.load[cluster] = most


# -- the neighbourhood's packing (solver.placement.closure) ------------------------------


cdef inline double _numpy_sum(double* values, Py_ssize_t n):
    """A sum of n doubles in numpy's own order (its pairwise sum, one block of at most 128),
    so a key computed here equals the one numpy computed before."""
    cdef double r[8]
    cdef double total = 0.0
    cdef Py_ssize_t i, j
    if n < 8:
        for i in range(n):
            total += values[i]
        return total
    for j in range(8):
        r[j] = values[j]
    i = 8
    while i + 8 <= n:
        for j in range(8):
            r[j] += values[i + j]
        i += 8
    total = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    while i < n:
        total += values[i]
        i += 1
    return total


cdef class Packer:
    """First-fit decreasing of a neighbourhood's units (the action's last) on the room the
    rest of the plan leaves, each unit free to go to any pool it may use in any cluster it may
    use: solver.placement.closure's packing, number for number.

    The units are packed in one row space: the nodes of every pool some unit may use, pools
    in index order. Larger units first: GPUs, then what the unit asks of the scarcest
    resources (each container's request as a share of the largest node it may use, weighted
    by how much of that resource the packing asks against what its nodes offer). A unit
    keeps its spot when nothing landed there from elsewhere (and it charges no device cap);
    else it goes to the open node it leaves the least room on, as a share of the node, else
    the first node not up yet with room."""

    cdef RoomLedger ledger
    cdef list units
    cdef list rows  # UnitRows of each unit
    cdef list clusters  # each unit's clusters, in its queue's routing order
    cdef Py_ssize_t dims, count
    cdef int64_t[::1] pool_start  # per fleet pool: its first row here, or -1
    cdef int64_t[:, ::1] free
    cdef uint8_t[::1] opened
    cdef int64_t[::1] row_pool, row_node
    cdef double[:, ::1] share  # per fleet pool: 1 / room on bounded dimensions, else 0
    cdef double[::1] weight
    cdef int64_t[::1] order
    cdef readonly Py_ssize_t placed  # units placed or searched for, over the passes

    def __init__(self, RoomLedger ledger, units):
        cdef Fleet fleet = ledger.fleet
        cdef Py_ssize_t u, i, d, p, row, n_rows = 0, c
        cdef UnitRows rows
        cdef PoolChoice choice
        cdef int64_t[::1] asked
        cdef int64_t[::1] offered
        self.ledger = ledger
        self.units = list(units)
        self.count = len(self.units)
        self.dims = fleet.dims
        self.placed = 0
        self.rows = [fleet.rows.unit(unit.items) for unit in self.units]
        self.clusters = []
        used = np.zeros(fleet.pools, dtype=np.uint8)
        for u in range(self.count):
            rows = <UnitRows>self.rows[u]
            mine = []
            for r in range(fleet.route_start[self.units[u].queue],
                           fleet.route_start[self.units[u].queue + 1]):
                c = fleet.route[r]
                if all(
                    (<PoolChoice>rows.choices[i]).start[c + 1] > (<PoolChoice>rows.choices[i]).start[c]
                    for i in range(rows.n)
                ):
                    mine.append(c)
            self.clusters.append(mine)
            for i in range(rows.n):
                choice = <PoolChoice>rows.choices[i]
                for c in mine:
                    for j in range(choice.start[c], choice.start[c + 1]):
                        used[choice.pools[j]] = 1
        self.pool_start = np.full(fleet.pools, -1, dtype=np.int64)
        for p in range(fleet.pools):
            if used[p]:
                self.pool_start[p] = n_rows
                n_rows += fleet.node_start[p + 1] - fleet.node_start[p]
        self.free = np.zeros((n_rows, self.dims), dtype=np.int64)
        self.opened = np.zeros(n_rows, dtype=np.uint8)
        self.row_pool = np.zeros(n_rows, dtype=np.int64)
        self.row_node = np.zeros(n_rows, dtype=np.int64)
        for p in range(fleet.pools):
            if self.pool_start[p] < 0:
                continue
            for row in range(fleet.node_start[p], fleet.node_start[p + 1]):
                i = self.pool_start[p] + row - fleet.node_start[p]
                for d in range(self.dims):
                    self.free[i, d] = ledger.free[row, d]
                self.opened[i] = ledger.opened[row]
                self.row_pool[i] = p
                self.row_node[i] = row - fleet.node_start[p]
        # The room everything outside the packing leaves: the ledger's, plus what the
        # neighbourhood's own units hold now (they are packed anew).
        for u in range(self.count):
            hint = self.units[u].hint
            if hint is None:
                continue
            rows = <UnitRows>self.rows[u]
            for i, (p, node) in enumerate(hint.spots):
                for d in range(self.dims):
                    self.free[self.pool_start[p] + node, d] += rows.request[i * rows.dims + d]
        share = np.zeros((fleet.pools, self.dims), dtype=np.float64)
        for p in range(fleet.pools):
            for d in range(self.dims):
                if fleet.declared[p, d]:
                    share[p, d] = 1.0 / max(fleet.pool_room[p, d], 1)
        self.share = share
        asked = np.zeros(self.dims, dtype=np.int64)
        offered = np.zeros(self.dims, dtype=np.int64)
        for u in range(self.count):
            rows = <UnitRows>self.rows[u]
            for i in range(rows.n):
                for d in range(self.dims):
                    asked[d] += rows.request[i * rows.dims + d]
        for i in range(n_rows):
            for d in range(self.dims):
                if self.share[self.row_pool[i], d] > 0:
                    offered[d] += self.free[i, d]
        self.weight = np.zeros(self.dims, dtype=np.float64)
        for d in range(self.dims):
            if offered[d] > 0:
                self.weight[d] = <double>asked[d] / <double>max(offered[d], 1)
        self._order()

    cdef void _order(self):
        """Larger first: (-GPUs, -weighted share, position), by insertion."""
        cdef Py_ssize_t u, i, d, j, k
        cdef UnitRows rows
        cdef PoolChoice choice
        cdef double total
        products = np.zeros(self.dims, dtype=np.float64)
        cdef double[::1] product = products
        gpus = np.zeros(self.count, dtype=np.int64)
        shares = np.zeros(self.count, dtype=np.float64)
        cdef int64_t[::1] g = gpus
        cdef double[::1] s = shares
        smallest = np.zeros(self.dims, dtype=np.float64)
        cdef double[::1] small = smallest
        cdef bint any_row
        for u in range(self.count):
            rows = <UnitRows>self.rows[u]
            total = 0.0
            for i in range(rows.n):
                g[u] += rows.request[i * rows.dims + GPU]
                choice = <PoolChoice>rows.choices[i]
                any_row = False
                for d in range(self.dims):
                    small[d] = 0.0
                for c in self.clusters[u]:
                    for j in range(choice.start[c], choice.start[c + 1]):
                        p = choice.pools[j]
                        if self.ledger.fleet.node_start[p + 1] == self.ledger.fleet.node_start[p]:
                            continue  # a pool of no nodes offers no row
                        for d in range(self.dims):
                            if not any_row or self.share[p, d] < small[d]:
                                small[d] = self.share[p, d]
                        any_row = True
                for d in range(self.dims):
                    product[d] = <double>rows.request[i * rows.dims + d] * (small[d] * self.weight[d])
                total += _numpy_sum(&product[0], self.dims)
            s[u] = total
        self.order = np.zeros(self.count, dtype=np.int64)
        for u in range(self.count):
            k = u
            while k > 0 and (
                g[u] > g[self.order[k - 1]]
                or (g[u] == g[self.order[k - 1]] and s[u] > s[self.order[k - 1]])
            ):
                self.order[k] = self.order[k - 1]
                k -= 1
            self.order[k] = u

    def pack(self, room_of, bint keep):
        """Each unit's placement, in the order given, or None: `room_of` maps (queue, device)
        to the room left under that device cap of the queue (solver.placement.decide)."""
        cdef Fleet fleet = self.ledger.fleet
        cdef Py_ssize_t k, u, i, d, c, row
        cdef UnitRows rows
        free = np.array(self.free, dtype=np.int64)
        opened = np.array(self.opened, dtype=np.uint8)
        cdef int64_t[:, ::1] fr = free
        cdef uint8_t[::1] op = opened
        caps = np.full(fleet.queues * fleet.names, -1, dtype=np.int64)
        cdef int64_t[::1] cap_room = caps
        for (q, device), left in room_of.items():
            k = name_id(device)
            if k < fleet.names:
                cap_room[q * fleet.names + k] = left
        placed = [None] * self.count
        moved = set()
        for k in range(self.count):
            u = self.order[k]
            unit = self.units[u]
            rows = <UnitRows>self.rows[u]
            hint = unit.hint if keep else None
            if hint is not None and self._stays(unit.queue, rows, hint, moved, cap_room):
                for i, (p, node) in enumerate(hint.spots):
                    row = self.pool_start[p] + node
                    for d in range(self.dims):
                        fr[row, d] -= rows.request[i * rows.dims + d]
                placed[u] = hint
                continue
            self.placed += 1
            clusters = self.clusters[u]
            if hint is not None:
                # Its own cluster first, so that a unit that still fits stays where it is.
                clusters = [hint.cluster] + [c for c in clusters if c != hint.cluster]
            for c in clusters:
                at = hint if hint is not None and hint.cluster == c else None
                spots = self._place(unit.queue, rows, c, fr, op, cap_room, at)
                if spots is not None:
                    placed[u] = (c, spots)
                    before = hint.spots if hint is not None else None
                    for i, spot in enumerate(spots):
                        if before is None or spot != before[i]:
                            moved.add(self.pool_start[spot[0]] + spot[1])
                    break
            if placed[u] is None:
                return None
        return placed

    cdef bint _stays(self, Py_ssize_t queue, UnitRows rows, hint, set moved, int64_t[::1] cap_room):
        cdef Fleet fleet = self.ledger.fleet
        cdef Py_ssize_t i, kind
        for i, (p, node) in enumerate(hint.spots):
            if self.pool_start[p] + node in moved:
                return False
            kind = fleet.pool_kind[p]
            if rows.untyped[i] and kind != fleet.no_device and cap_room[queue * fleet.names + kind] >= 0:
                return False
        return True

    cdef object _place(
        self, Py_ssize_t queue, UnitRows rows, Py_ssize_t cluster, int64_t[:, ::1] fr,
        uint8_t[::1] op, int64_t[::1] cap_room, at
    ):
        """The unit's containers on nodes of `cluster`, taken from `fr`, `op` and
        `cap_room`; or None with all three as they were."""
        cdef Py_ssize_t i, k, d, row, slot
        cdef int64_t spot_row
        taken = []  # per container placed so far: (row, was it open, the cap slot it charged)
        spots = []
        for i in range(rows.n):
            spot_row = -1
            if at is not None:
                p, node = at.spots[i]
                spot_row = self.pool_start[p] + node
            row = self._row(queue, rows, i, cluster, fr, op, cap_room, spot_row)
            if row < 0:
                for k in range(len(taken) - 1, -1, -1):
                    row, was_open, slot = taken[k]
                    for d in range(self.dims):
                        fr[row, d] += rows.request[k * rows.dims + d]
                    op[row] = was_open
                    if slot >= 0:
                        cap_room[slot] += rows.gpus[k]
                return None
            slot = self._charged(queue, rows, i, self.row_pool[row], cap_room)
            taken.append((row, op[row], slot))
            for d in range(self.dims):
                fr[row, d] -= rows.request[i * rows.dims + d]
            op[row] = 1
            if slot >= 0:
                cap_room[slot] -= rows.gpus[i]
            spots.append((int(self.row_pool[row]), int(self.row_node[row])))
        return tuple(spots)

    cdef Py_ssize_t _charged(
        self, Py_ssize_t queue, UnitRows rows, Py_ssize_t i, Py_ssize_t pool,
        int64_t[::1] cap_room
    ):
        """The slot of the device cap an untyped container charges on a node of `pool`, or
        -1 when it charges none."""
        cdef Fleet fleet = self.ledger.fleet
        cdef Py_ssize_t kind = fleet.pool_kind[pool], slot
        if not rows.untyped[i] or kind == fleet.no_device:
            return -1
        slot = queue * fleet.names + kind
        return slot if cap_room[slot] >= 0 else -1

    cdef Py_ssize_t _row(
        self, Py_ssize_t queue, UnitRows rows, Py_ssize_t i, Py_ssize_t cluster,
        int64_t[:, ::1] fr, uint8_t[::1] op, int64_t[::1] cap_room, int64_t spot_row
    ):
        """Where the container sits when it still fits there, else the open node it leaves
        the least room on (as a share of the node), else the first node not up yet with
        room; -1 when none has room."""
        cdef Fleet fleet = self.ledger.fleet
        cdef PoolChoice choice = <PoolChoice>rows.choices[i]
        cdef Py_ssize_t j, p, row, d, first = -1, best = -1, slot
        cdef double left, most, least = 0.0
        if spot_row >= 0 and self._fits(rows, i, fr, spot_row):
            slot = self._charged(queue, rows, i, self.row_pool[spot_row], cap_room)
            if slot < 0 or cap_room[slot] >= rows.gpus[i]:
                return spot_row
        for j in range(choice.start[cluster], choice.start[cluster + 1]):
            p = choice.pools[j]
            slot = self._charged(queue, rows, i, p, cap_room)
            if slot >= 0 and cap_room[slot] < rows.gpus[i]:
                continue  # the queue's cap on this pool's device has no room left for it
            for row in range(self.pool_start[p],
                             self.pool_start[p] + fleet.node_start[p + 1] - fleet.node_start[p]):
                if not self._fits(rows, i, fr, row):
                    continue
                if first < 0:
                    first = row
                if not op[row]:
                    continue
                most = 0.0
                for d in range(self.dims):
                    left = <double>(fr[row, d] - rows.request[i * rows.dims + d]) * self.share[p, d]
                    if d == 0 or left > most:
                        most = left
                if best < 0 or most < least:
                    best, least = row, most
        return best if best >= 0 else first

    cdef inline bint _fits(self, UnitRows rows, Py_ssize_t i, int64_t[:, ::1] fr, Py_ssize_t row):
        cdef Py_ssize_t d
        for d in range(self.dims):
            if fr[row, d] < rows.request[i * rows.dims + d]:
                return False
        return True


# -- places in line ---------------------------------------------------------------------

cdef Py_ssize_t _sets_sharing(
    Py_ssize_t s, const int64_t[::1] set_start, const int64_t[::1] set_pools,
    const int64_t[::1] pool_start, const int64_t[::1] pool_sets, int64_t[::1] last,
    int64_t* out
):
    """How many sets share a pool with set s, each counted once (`last[t] == s` marks t met);
    with `out`, they are written there too: the same walk counts, then fills."""
    cdef Py_ssize_t i, j, n = 0
    cdef int64_t p, t
    for i in range(set_start[s], set_start[s + 1]):
        p = set_pools[i]
        for j in range(pool_start[p], pool_start[p + 1]):
            t = pool_sets[j]
            if last[t] != s:
                last[t] = s
                if out != NULL:
                    out[n] = t
                n += 1
    return n


def sharing_lists(
    const int64_t[::1] set_start, const int64_t[::1] set_pools,
    const int64_t[::1] pool_start, const int64_t[::1] pool_sets
):
    """For each pool set, the sets that share a pool with it (itself among them when it has
    a pool), as `earlier_sharing` reads them: (start, sharing), set s's being
    `sharing[start[s]:start[s + 1]]`. Set s's pools are `set_pools[set_start[s]:set_start[s +
    1]]`, and pool p's sets `pool_sets[pool_start[p]:pool_start[p + 1]]`; each set walks the
    sets of its pools, so the work is what the sets share, never sets times sets."""
    cdef Py_ssize_t sets = set_start.shape[0] - 1, s
    start_array = np.zeros(sets + 1, dtype=np.int64)
    last_array = np.full(sets, -1, dtype=np.int64)  # the set whose list `t` last joined
    cdef int64_t[::1] start = start_array
    cdef int64_t[::1] last = last_array
    for s in range(sets):
        start[s + 1] = start[s] + _sets_sharing(
            s, set_start, set_pools, pool_start, pool_sets, last, NULL
        )
    sharing_array = np.zeros(start[sets], dtype=np.int64)
    cdef int64_t[::1] sharing = sharing_array
    last[:] = -1
    for s in range(sets):
        if start[s + 1] > start[s]:
            _sets_sharing(s, set_start, set_pools, pool_start, pool_sets, last, &sharing[start[s]])
    return start_array, sharing_array


def earlier_sharing(const int64_t[::1] members, const int64_t[::1] start, const int64_t[::1] sharing):
    """For each entry of a stretch of the waiting line (`members[k]`, its pool set's number),
    how many entries before it have a pool set that shares a pool with its own; the sets that
    share one with set s are `sharing[start[s]:start[s + 1]]` (s itself among them when it
    has a pool). Each entry counts itself in every set it shares with, so the work is the
    sum of the entries' sharing sets, not entries times sets (solver.placement.decode)."""
    cdef Py_ssize_t k, j, s, n = members.shape[0]
    counted_array = np.zeros(n, dtype=np.int64)
    seen_array = np.zeros(max(start.shape[0] - 1, 0), dtype=np.int64)
    cdef int64_t[::1] counted = counted_array
    cdef int64_t[::1] seen = seen_array
    for k in range(n):
        s = members[k]
        counted[k] = seen[s]
        for j in range(start[s], start[s + 1]):
            seen[sharing[j]] += 1
    return counted_array
