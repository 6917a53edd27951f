"""Prompt budgets sized to the machine: they shrink with a slow reader or a short deadline
and grow back as the cache warms up (real tiny models, the real prompt builder)."""

# Fixtures imported from model_fixtures are requested by parameter name, which ruff reads as
# redefining the import.
# ruff: noqa: F811

from __future__ import annotations

from model_fixtures import (  # noqa: F401  (fixtures are used by name)
    model_cache,
    tiny_factory,
    tiny_model,
    tiny_model_path,
    tiny_session_model,
)

from lsp_server.decoding import DecodeOptions
from lsp_server.model import FimModel
from lsp_server.prompt_budget import COLD_SHARE, MIN_BUDGET, WARM_SHARE, PromptBudget, ReadSpeed

BEFORE = "".join(f"value_{i} = compute({i}, 'x')\n" for i in range(300))
AFTER = "".join(f"after_{i}(value_{i})\n" for i in range(300))
OPTIONS = DecodeOptions(max_tokens=32)


def test_the_budget_follows_the_measured_speed() -> None:
    speed = ReadSpeed(200.0)
    budget = PromptBudget(speed)
    assert budget.cold_allowance(3.0) == int(200 * COLD_SHARE * 3)
    assert budget.machine_window(3.0) == int(200 * WARM_SHARE * 3)
    assert budget.cold_allowance(1.0) < budget.cold_allowance(3.0)  # a shorter deadline
    speed.note(50, 1.0)  # a slow read: 50 tokens/s
    assert speed.tokens_per_s < 200
    assert budget.cold_allowance(3.0) < int(200 * COLD_SHARE * 3)  # shrinks
    for _ in range(30):
        speed.note(400, 1.0)
    assert round(speed.tokens_per_s) == 400  # and grows again
    speed.note(4, 0.0001)  # too short to time: ignored
    assert round(speed.tokens_per_s) == 400
    assert PromptBudget(ReadSpeed(1.0)).cold_allowance(0.05) == MIN_BUDGET


def test_a_cold_request_reads_a_fraction_of_its_deadline(tiny_model: FimModel) -> None:
    budget = PromptBudget(ReadSpeed(400.0))
    choice = budget.choose(tiny_model, BEFORE, AFTER, OPTIONS, 3.0)
    assert choice.budget == budget.cold_allowance(3.0) == 180
    assert choice.uncached == len(choice.prompt)  # nothing cached: all of it is read
    assert len(choice.prompt) <= choice.budget + 8  # the budget plus the FIM markers
    text = tiny_model.vocab.detokenize(choice.prompt).decode()
    assert text.startswith("value_") and "value_299 = compute(299, 'x')\n" in text  # whole lines


def test_the_budget_grows_back_as_the_cache_warms(tiny_model: FimModel) -> None:
    budget = PromptBudget(ReadSpeed(400.0))
    cold = budget.choose(tiny_model, BEFORE, AFTER, OPTIONS, 3.0)
    tiny_model.prefill(cold.prompt)  # the cold request read its prompt
    typed = budget.choose(tiny_model, BEFORE + "va", AFTER, OPTIONS, 3.0)
    assert typed.uncached <= 4  # typing on: the head stays where the cache has it
    widest = budget.choose(tiny_model, BEFORE, AFTER, OPTIONS, 3.0, allowance=1 << 30)
    assert widest.budget == budget.machine_window(3.0) > cold.budget
    tiny_model.read_ahead(widest.prompt)  # read ahead while the user paused
    warm = budget.choose(tiny_model, BEFORE, AFTER, OPTIONS, 3.0)
    assert warm.budget == widest.budget and warm.uncached == 0
    assert len(warm.prompt) > 3 * len(cold.prompt)


def test_a_moved_cursor_finds_the_largest_prompt_within_the_allowance(
    tiny_model: FimModel,
) -> None:
    budget = PromptBudget(ReadSpeed(400.0))
    widest = budget.choose(tiny_model, BEFORE, AFTER, OPTIONS, 3.0, allowance=1 << 30)
    tiny_model.prefill(widest.prompt)
    lines = BEFORE.splitlines(keepends=True)
    moved = "".join(lines[:-40])  # the cursor moved up 40 lines: the window slides up
    rest = "".join(lines[-40:]) + AFTER
    choice = budget.choose(tiny_model, moved, rest, OPTIONS, 3.0)
    assert choice.uncached <= budget.cold_allowance(3.0)
    assert choice.budget < widest.budget  # a smaller window whose new part fits the time
