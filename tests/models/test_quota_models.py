"""Quota-managed job queues at the boundary: every limit of the seed, and the queue's status.

Each test quotes the sentence of the quota-shares seed document it checks, in Dutch and
in English (the seed's own English rendering where it has one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from models.errors import InvalidInput
from models.quota import (
    HEALTHY,
    JobQueue,
    QueueState,
    QueueStatus,
    QuotaShare,
    SchedulingPolicy,
    ServiceEnvironment,
    ShareStrategy,
    job_queue_statuses,
    require_valid_job_queues,
)
from models.scenario import dump_scenario, snapshot_from_dict
from tests.support.quota_builders import G5, NOW, P3, seed_data, share, world

Data = dict[str, Any]


def load(data: Data) -> Any:
    return snapshot_from_dict(data, "scenario")


def rejected(mutate: Callable[[Data], None]) -> str:
    data = seed_data()
    mutate(data)
    with pytest.raises(InvalidInput) as error:
        load(data)
    return error.value.message


def shares(data: Data) -> list[Data]:
    found: list[Data] = data["job_queues"][0]["quota_shares"]
    return found


def test_seed_example_loads_and_round_trips() -> None:
    """ "Een configuratievoorbeeld van AWS stelt drie projectshares elk in op max_capacity=1 voor
    ml.g5.xlarge en geeft de Service Environment een maximale capaciteit van 3 voor hetzelfde
    instancetype. De shares gebruiken achtereenvolgens LEND_AND_BORROW, LEND en RESERVE."
    (Three project shares, each max 1 ml.g5.xlarge, in a service environment of max 3, with
    LEND_AND_BORROW, LEND and RESERVE in that order.)"""
    snapshot = load(seed_data())
    queue = snapshot.job_queues[0]
    assert [(s.name, s.strategy, s.capacity_limits) for s in queue.quota_shares] == [
        ("project-a", ShareStrategy.LEND_AND_BORROW, {G5: 1}),
        ("project-b", ShareStrategy.LEND, {G5: 1}),
        ("project-c", ShareStrategy.RESERVE, {G5: 1}),
    ]
    assert snapshot.service_environments[0].capacity_limits == {G5: 3}
    assert load(yaml.safe_load(dump_scenario(snapshot))) == snapshot


# "Een Job Queue kan maximaal 20 quota shares bevatten."
# (A job queue can hold at most 20 quota shares.)
def grow_to(count: int) -> Callable[[Data], None]:
    def grow(data: Data) -> None:
        extra = {"capacity_limits": {G5: 1}, "strategy": "LEND"}
        shares(data).extend({"name": f"s{i}", **extra} for i in range(3, count))

    return grow


def test_twenty_shares_are_accepted() -> None:
    data = seed_data()
    grow_to(20)(data)
    assert len(load(data).job_queues[0].quota_shares) == 20


def test_twenty_one_shares_are_rejected() -> None:
    message = rejected(grow_to(21))
    assert "job_queues.0.quota_shares" in message
    assert "1 to 20 quota shares, not 21" in message


def test_a_job_queue_without_shares_is_rejected() -> None:
    message = rejected(lambda d: d["job_queues"][0].update(quota_shares=[]))
    assert "1 to 20 quota shares, not 0" in message


# "Per share zijn 1 tot 5 capaciteitslimieten mogelijk."
# (Each share has 1 to 5 capacity limits.)
FIVE_TYPES = ["ml.g5.xlarge", "ml.g5.2xlarge", "ml.g5.4xlarge", "ml.p3.2xlarge", "ml.p4d.24xlarge"]


@pytest.mark.parametrize("count", [0, 6])
def test_zero_or_six_capacity_limits_are_rejected(count: int) -> None:
    types = [*FIVE_TYPES, "ml.p5.48xlarge"][:count]
    message = rejected(lambda d: shares(d)[1].update(capacity_limits=dict.fromkeys(types, 1)))
    assert "job_queues.0.quota_shares.1.capacity_limits" in message
    assert f"1 to 5 capacity limits, not {count}" in message


def test_five_capacity_limits_are_accepted() -> None:
    data = seed_data()
    shares(data)[1]["capacity_limits"] = dict.fromkeys(FIVE_TYPES, 1)
    data["service_environments"][0]["capacity_limits"] = dict.fromkeys(FIVE_TYPES, 3)
    assert len(load(data).job_queues[0].quota_shares[1].capacity_limits) == 5


# "AWS drukt die limieten uit in instancetypen die SageMaker Training ondersteunt."
# (AWS expresses the limits in instance types that SageMaker Training supports.)
@pytest.mark.parametrize("name", ["ml.g5.huge", "g5.xlarge", "H100", "ml.g5.96xlarge"])
def test_an_instance_type_sagemaker_training_does_not_support_is_rejected(name: str) -> None:
    message = rejected(lambda d: shares(d)[0].update(capacity_limits={name: 1}))
    assert f"capacity_limits.{name}" in message
    assert "not an instance type SageMaker Training supports" in message


def test_instance_types_are_read_case_insensitively() -> None:
    data = seed_data()
    shares(data)[0]["capacity_limits"] = {"ML.G5.XLARGE": 1}
    assert load(data).job_queues[0].quota_shares[0].capacity_limits == {G5: 1}


@pytest.mark.parametrize("count", [-1, "many", 1.5, True])
def test_a_limit_that_is_not_a_whole_number_is_rejected(count: Any) -> None:
    message = rejected(lambda d: shares(d)[0].update(capacity_limits={G5: count}))
    assert "is not a whole number of instances" in message


# "Maak een Service Environment van het type SAGEMAKER_TRAINING. Gebruik capaciteitslimieten op
# basis van instancetypen die SageMaker Training accepteert. AWS Batch verwacht instancetypen, geen
# limiet met NUM_INSTANCES." (A service environment of type SAGEMAKER_TRAINING with capacity
# limits by instance type, not NUM_INSTANCES.)
def test_a_num_instances_limit_on_the_environment_is_rejected() -> None:
    message = rejected(
        lambda d: d["service_environments"][0].update(capacity_limits={"NUM_INSTANCES": 3})
    )
    assert "service_environments.0.capacity_limits" in message
    assert "NUM_INSTANCES is not accepted" in message


def test_a_num_instances_limit_on_a_share_is_rejected() -> None:
    message = rejected(lambda d: shares(d)[2].update(capacity_limits={"NUM_INSTANCES": 1}))
    assert "job_queues.0.quota_shares.2.capacity_limits" in message
    assert "NUM_INSTANCES is not accepted" in message


def test_an_environment_without_capacity_limits_is_rejected() -> None:
    message = rejected(lambda d: d["service_environments"][0].update(capacity_limits={}))
    assert "service_environments.0.capacity_limits" in message


@pytest.mark.parametrize("where", ["service_environments", "job_queues"])
def test_only_sagemaker_training_is_accepted(where: str) -> None:
    """ "De queue moet het type SAGEMAKER_TRAINING hebben." (The queue must have type
    SAGEMAKER_TRAINING; so must the service environment.)"""
    message = rejected(lambda d: d[where][0].update(type="EC2"))
    assert f"{where}.0.type" in message
    assert "SAGEMAKER_TRAINING" in message


# LEND_AND_BORROW: "jobs in de eigen share mogen ook ongebruikte capaciteit lenen, binnen een
# ingestelde leenlimiet" (the share's jobs may also borrow unused capacity, within a configured
# borrow limit); only that strategy borrows, so only it takes a borrow limit.
@pytest.mark.parametrize("index", [1, 2])
def test_a_borrow_limit_on_a_share_that_does_not_borrow_is_rejected(index: int) -> None:
    message = rejected(lambda d: shares(d)[index].update(borrow_limit=100))
    assert f"job_queues.0.quota_shares.{index}" in message
    assert "borrow_limit" in message
    assert "only LEND_AND_BORROW shares take a borrow limit" in message


def test_a_negative_borrow_limit_other_than_minus_one_is_rejected() -> None:
    message = rejected(lambda d: shares(d)[0].update(borrow_limit=-2))
    assert "job_queues.0.quota_shares.0.borrow_limit" in message


@pytest.mark.parametrize(
    ("limit", "borrow_limit", "borrowable"),
    [
        (1, None, 3),  # omitted: no limit but the environment's maximum
        (1, -1, 3),  # AWS's spelling of "unlimited"
        (2, 100, 2),  # a percentage of the share's own limit for that type
        (2, 150, 3),
        (1, 50, 0),  # fractions round down
        (3, 0, 0),
    ],
)
def test_the_borrow_limit_is_a_percentage_of_the_share_limit(
    limit: int, borrow_limit: int | None, borrowable: int
) -> None:
    borrower = share("a", "LEND_AND_BORROW", {G5: limit}, borrow_limit=borrow_limit)
    assert borrower.borrowable(G5, environment_max=3) == borrowable
    assert borrower.borrowable(P3, environment_max=3) == (3 if borrow_limit in (None, -1) else 0)


def test_shares_that_do_not_borrow_borrow_nothing() -> None:
    for strategy in ("LEND", "RESERVE"):
        assert share("b", strategy).borrowable(G5, environment_max=3) == 0


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda d: d["jobs"][0].update(count=0), "jobs.0.count"),
        (lambda d: d["jobs"][0].update(priority=10000), "jobs.0.priority"),
        (lambda d: d["jobs"][0].pop("started_at"), "a RUNNING job needs started_at"),
        (lambda d: d["jobs"][2].update(started_at="2026-11-30T09:00:00Z"), "has no started_at"),
        (lambda d: d["jobs"][0].update(instance_type="NUM_INSTANCES"), "jobs.0.instance_type"),
        (lambda d: d["jobs"][0].update(share="project-z"), "has no quota share 'project-z'"),
        (lambda d: d["jobs"][0].update(job_queue="other"), "unknown job queue 'other'"),
        (lambda d: d["jobs"][1].update(id="a-1"), "job 'a-1' appears twice"),
        (lambda d: shares(d)[1].update(name="project-a"), "quota share 'project-a' appears"),
        (
            lambda d: d["job_queues"][0].update(service_environment="nowhere"),
            "unknown service environment 'nowhere'",
        ),
        (
            lambda d: d["job_queues"][0].update(scheduling_policy="nothing"),
            "unknown scheduling policy 'nothing'",
        ),
    ],
)
def test_bad_jobs_and_references_are_rejected_naming_the_field(
    mutate: Callable[[Data], None], fragment: str
) -> None:
    assert fragment in rejected(mutate)


# "Controleer de status van de Job Queue. AWS noemt ENABLED als vereiste status, met VALID en
# JobQueue Healthy als status en reden." (The queue's state must be ENABLED, with status VALID
# and reason "JobQueue Healthy".)
def test_a_consistent_job_queue_is_enabled_valid_and_healthy() -> None:
    snapshot = load(seed_data())
    status = job_queue_statuses(
        snapshot.scheduling_policies, snapshot.service_environments, snapshot.job_queues
    )["training"]
    assert (status.state, status.status, status.reason) == (
        QueueState.ENABLED,
        QueueStatus.VALID,
        HEALTHY,
    )
    assert status.reason == "JobQueue Healthy"
    require_valid_job_queues(
        snapshot.scheduling_policies, snapshot.service_environments, snapshot.job_queues
    )


def test_a_disabled_job_queue_reports_its_state() -> None:
    data = seed_data()
    data["job_queues"][0]["state"] = "DISABLED"
    snapshot = load(data)
    status = job_queue_statuses(
        snapshot.scheduling_policies, snapshot.service_environments, snapshot.job_queues
    )["training"]
    assert (status.state, status.status, status.ready) == (
        QueueState.DISABLED,
        QueueStatus.VALID,
        False,
    )


def invalid_reason(
    policies: list[SchedulingPolicy],
    environments: list[ServiceEnvironment],
    queues: list[JobQueue],
    name: str = "training",
) -> tuple[str, InvalidInput]:
    status = job_queue_statuses(policies, environments, queues)[name]
    assert status.status is QueueStatus.INVALID
    with pytest.raises(InvalidInput) as error:
        require_valid_job_queues(policies, environments, queues)
    return status.reason, error.value


# "Maak een quota-compatibele Scheduling Policy. De policy moet een quotaSharePolicy bevatten."
# (A quota-compatible scheduling policy: it must contain a quotaSharePolicy.)
def test_a_policy_without_a_quota_share_policy_makes_the_queue_invalid() -> None:
    base = world([share("a", "LEND")])
    policies = [SchedulingPolicy(name="quota-policy")]
    reason, error = invalid_reason(policies, base.environments, base.job_queues)
    assert "has no quota_share_policy" in reason
    assert error.field == "job_queues.0.scheduling_policy"


# "Een quotabeheerde Service Environment kan aan één quotabeheerde Job Queue worden gekoppeld."
# (A quota-managed service environment can be attached to one quota-managed job queue.)
def test_a_second_job_queue_on_the_same_environment_is_invalid() -> None:
    base = world([share("a", "LEND")])
    second = base.job_queues[0].model_copy(update={"name": "second"})
    queues = [base.job_queues[0], second]
    statuses = job_queue_statuses(base.policies, base.environments, queues)
    assert statuses["training"].reason == HEALTHY
    reason, error = invalid_reason(base.policies, base.environments, queues, "second")
    assert "already attached to job queue training" in reason
    assert error.field == "job_queues.1.service_environment"


# "Per share zijn 1 tot 5 capaciteitslimieten mogelijk. AWS drukt die limieten uit in
# instancetypen die SageMaker Training ondersteunt." A share's instance type must be one the
# queue's service environment offers.
def test_a_share_limit_on_a_type_the_environment_does_not_offer_makes_the_queue_invalid() -> None:
    base = world([share("a", "LEND"), share("b", "RESERVE", {P3: 1})])
    reason, error = invalid_reason(base.policies, base.environments, base.job_queues)
    assert "quota share b limits ml.p3.2xlarge" in reason
    assert "does not offer (ml.g5.xlarge)" in reason
    assert error.field == "job_queues.0.quota_shares.1.capacity_limits.ml.p3.2xlarge"


def test_an_invalid_queue_loads_so_its_status_can_be_reported() -> None:
    data = seed_data()
    data["scheduling_policies"][0].pop("quota_share_policy")
    snapshot = load(data)
    assert snapshot.scheduling_policies[0].quota_share_policy is None


def test_live_changes_are_validated_too() -> None:
    """A live change to a share (the admin lowering a limit) goes through the same checks."""
    borrower = QuotaShare(name="a", capacity_limits={G5: 2}, strategy="LEND")
    borrower.capacity_limits = {G5: 1}
    assert borrower.capacity_limits == {G5: 1}
    with pytest.raises(ValueError, match="NUM_INSTANCES is not accepted"):
        borrower.capacity_limits = {"NUM_INSTANCES": 1}
    assert NOW.tzinfo is not None
