"""The ``--help`` of every command says what an option does when it is not given, in one wording.

Walks the parser ``pal-opt`` builds (every sub-command, ``import``/``export`` formats included).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from pal_opt.cli import build_parser

#: Options whose help does not yet give their default (none today); remove an entry once its help says it.
KNOWN_WITHOUT_DEFAULT: set[str] = set()


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[
        tuple[str, argparse.ArgumentParser]]:
    """(command path, its parser) for every parser below ``parser``, depth first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))
    yield " ".join(path), parser


def options(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        if action.option_strings and not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            yield action


def flag(action: argparse.Action) -> str:
    return max(action.option_strings, key=len)


def has_value_default(action: argparse.Action) -> bool:
    """Whether the option has a default a user must be told: not None, not a switch left off."""
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse.BooleanOptionalAction)):
        return False
    d = action.default
    return not (d is None or d is False or d == [] or d == argparse.SUPPRESS)


def test_every_option_with_a_default_names_it() -> None:
    missing = {f"{name} {flag(a)}" for name, p in commands(build_parser()) for a in options(p)
               if has_value_default(a) and "default" not in (a.help or "")}
    assert missing - KNOWN_WITHOUT_DEFAULT == set(), "say '(default X)' in these options' help"


@pytest.mark.parametrize("name", ["solve", "repair", "simulate"])
def test_solver_options_say_what_happens_without_them(name: str) -> None:
    parser = dict(commands(build_parser()))[name]
    helps = {flag(a): a.help or "" for a in options(parser)}
    for opt in ("--gap", "--threads", "--time-limit"):
        assert "default" in helps[opt], f"{name} {opt}: {helps[opt]!r}"


def test_simulate_and_simulate_sia_agree_on_the_shared_options() -> None:
    """``simulate-sia`` is ``simulate`` on a Sia trace: the options both take have the same default
    and the same metavar for the cluster of GPU types."""
    parsers = dict(commands(build_parser()))
    sim = {flag(a): a for a in options(parsers["simulate"])}
    sia = {flag(a): a for a in options(parsers["simulate-sia"])}
    assert sim["--backend"].default is None and sia["--backend"].default is None
    assert "first installed" in (sia["--backend"].help or "")
    assert sia["--cluster"].metavar == "TYPE:SERVERSxGPUS,..."
    assert "TYPE:SERVERSxGPUS" in (sim["--cluster"].help or "")
    assert parsers["generate"]._option_string_actions["--cluster"].metavar == "TYPE:SERVERSxGPUS,..."
    assert sia["--round"].metavar == sim["--round"].metavar


def test_simulate_and_simulate_sia_give_the_same_placeholders() -> None:
    """Every option both commands take shows the same placeholder (``-o RESULT.json`` was
    ``OUT.json`` in ``simulate-sia``, ``--plot PNG`` was ``FIG.png``, ``--policy POLICY[,...]`` was
    ``METHOD[,...]`` in ``simulate``), but ``--cluster`` (``simulate`` takes a PAL cluster too) and
    ``--backend`` (``simulate`` lists its choices); ``-o`` is ``RESULT.json`` as README and
    ``pal-opt compare`` say."""
    parsers = dict(commands(build_parser()))
    sim = {flag(a): a for a in options(parsers["simulate"])}
    sia = {flag(a): a for a in options(parsers["simulate-sia"])}
    differ = {f: (sim[f].metavar, sia[f].metavar) for f in set(sim) & set(sia) if sim[f].metavar != sia[f].metavar}
    assert set(differ) == {"--cluster", "--backend"}, differ
    assert sim["--output"].metavar == "RESULT.json" and sim["--policy"].metavar == "POLICY[,POLICY...]"
    assert parsers["compare"]._option_string_actions["--plot"].metavar == sim["--plot"].metavar == "PNG"
    assert "--out RESULT.json" in (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_restart_cost_help_gives_its_own_default() -> None:
    """``simulate --help`` once said ``--restart-cost`` defaults to '360; sia traces: 60' (the
    round length's default); it is 0."""
    for name, parser in commands(build_parser()):
        action = parser._option_string_actions.get("--restart-cost")
        if action is None:
            continue
        said = "default the instance's" if action.default is None else f"default {action.default:g})"
        assert said in " ".join((action.help or "").split()), f"{name} --restart-cost: {action.help!r}"


def test_help_is_never_wrapped_inside_a_hyphenated_word(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 80 columns ``solve --help`` said ``pip install 'pal-`` and, on the next line,
    ``opt[plot]'``; ``import k8s --help`` cut its default label key after ``gce-topology-``: 22
    words of the commands' help were cut at a hyphen (argparse's textwrap breaks there).  Every whitespace-separated word of an option's help and a command's description
    must come out whole, to be copied."""
    monkeypatch.setenv("COLUMNS", "80")
    broken = []
    for name, parser in commands(build_parser()):
        shown = " ".join(parser.format_help().split())
        texts = [parser.description or "", *(a.help or "" for a in parser._actions)]
        broken += [f"{name or 'pal-opt'}: {word}" for text in texts for word in text.split()
                   if "-" in word.strip("-") and "%" not in word and word not in shown]
    assert broken == []


#: Options whose placeholder differs between commands, and why (each a different value).
PLACEHOLDERS_DIFFER = {
    "--output": "each command writes its own kind of file (INSTANCE.json, PLACEMENT.json, RESULT.json, ...)",
    "--jobs": "a job CSV (import), a queue length (generate) or job ids (solve)",
    "--method": "placement methods (solve) or dp|ip (partition)",
    "--backend": "solve, repair and simulate list their choices; simulate-sia and partition take any registered one",
    "--cluster": "simulate takes a PAL shape or an instance file too",
    "--gpus-per-node": "GPUS_PER_NODE beside --nodes (generate), N alone (import slurm)",
}


def test_an_option_several_commands_take_shows_one_placeholder() -> None:
    """``partition --plot FILE`` and ``--time-limit SECONDS`` were ``--plot PNG`` and
    ``--time-limit S`` in every other command."""
    shown: dict[str, set[str]] = {}
    for _, parser in commands(build_parser()):
        for a in options(parser):
            if a.nargs != 0:
                shown.setdefault(flag(a), set()).add(str(a.metavar or a.choices or a.dest.upper()))
    differ = {f for f, m in shown.items() if len(m) > 1}
    assert differ == set(PLACEHOLDERS_DIFFER), {f: shown[f] for f in differ ^ set(PLACEHOLDERS_DIFFER)}


def test_simulate_and_simulate_sia_plot_help_names_the_panels_they_draw() -> None:
    """``simulate-sia --plot`` said ``JCT CDF`` and ``simulate --plot`` the CDF and the utilisation:
    with several policies both draw a third panel, each job's JCT against the first policy's
    (``plot_result``), and a Sia run its utilisation too."""
    parsers = dict(commands(build_parser()))
    helps = {name: " ".join((parsers[name]._option_string_actions["--plot"].help or "").split())
             for name in ("simulate", "simulate-sia")}
    assert helps["simulate"] == helps["simulate-sia"]
    assert "the JCT CDF and the utilisation per round" in helps["simulate"]
    assert "each job's JCT against the first's" in helps["simulate"]


def test_solve_options_name_the_methods_that_take_them() -> None:
    """``--jobs`` and ``--jobs-from`` said ``exact methods:``, but ``ilp-preempt``, an exact method,
    refuses both (``option(s) --jobs do not apply to method 'ilp-preempt'``): their help names the
    methods whose options take ``jobs``, as the registry says, and ``--canonical`` those taking
    ``canonical``."""
    from pal_opt.methods import METHODS

    solve = dict(commands(build_parser()))["solve"]
    for option, flags in (("jobs", ("--jobs", "--jobs-from")), ("canonical", ("--canonical",))):
        takers = ", ".join(name for name, m in METHODS.items() if option in m.options)
        for f in flags:
            assert (solve._option_string_actions[f].help or "").startswith(f"{takers}: "), (f, takers)
