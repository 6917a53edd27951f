"""Greet people from the command line, politely and in several languages."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field

GREETINGS: dict[str, str] = {
    "en": "Hello",
    "fr": "Bonjour",
    "de": "Hallo",
    "es": "Hola",
}


@dataclass
class Greeter:
    language: str = "en"
    excited: bool = False
    greeted: list[str] = field(default_factory=list)

    def greet(self, name: str) -> str:
        word = GREETINGS.get(self.language, GREETINGS["en"])
        mark = "!" if self.excited else "."
        self.greeted.append(name)
        return f"{word}, {name.strip().title()}{mark}"

    def summary(self) -> str:
        match len(self.greeted):
            case 0:
                return "Nobody was greeted."
            case 1:
                return f"Greeted {self.greeted[0]}."
            case n:
                return f"Greeted {n} people: {', '.join(sorted(self.greeted))}."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", default=["world"])
    parser.add_argument("--language", choices=sorted(GREETINGS), default="en")
    parser.add_argument("--excited", action="store_true")
    args = parser.parse_args(argv)

    greeter = Greeter(args.language, args.excited)
    for name in args.names:
        print(greeter.greet(name))
    print(greeter.summary(), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
