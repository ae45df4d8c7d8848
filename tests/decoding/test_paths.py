"""`decoding/paths.py`: what reports record of paths and command lines names no directory of the machine."""

from decoding.paths import REPO, display_command, display_path


def test_a_command_line_names_repository_paths_relative_to_it():
    inside = str(REPO / "docs" / "bench" / "x")
    line = display_command("python -m decoding", ["bench", "--out", inside, f"--report={inside}/r.md", "--seed", "3",
                                                  "/elsewhere/prompts.jsonl"])
    assert line == ("python -m decoding bench --out docs/bench/x --report=docs/bench/x/r.md --seed 3 "
                    "/elsewhere/prompts.jsonl")
    assert str(REPO) not in line
    assert display_path(inside) == "docs/bench/x" and display_path("relative/y") == "relative/y"


def test_a_command_line_quotes_what_a_shell_would_split_so_it_can_be_pasted_back():
    import shlex

    argv = ["bench", "--draft-tree", "4,2;6,3", "--prompt", "Why is the sky blue?", "--gamma=auto", "--x=a b"]
    line = display_command("python -m decoding", argv)
    assert line == ("python -m decoding bench --draft-tree '4,2;6,3' --prompt 'Why is the sky blue?' --gamma=auto "
                    "--x='a b'")
    assert shlex.split(line)[3:] == argv
