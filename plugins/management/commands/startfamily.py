"""`manage.py startfamily NAME [--dir DIR]`: write a new plugin family into
DIR/NAME (the current folder by default): the family with an example action
and a state reader, a fixture page, and tests that pass as written. It
refuses a name a family or module has already and a folder that exists, and
never overwrites anything."""

import shlex
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from plugins.scaffold import ScaffoldNotMade, write_family


class Command(BaseCommand):
    help = "Write a new plugin family, a fixture page and its tests into DIR/NAME; nothing is overwritten."

    def add_arguments(self, parser):
        parser.add_argument("name", help="the family's name, and its module's: a-z, 0-9 and _ (e.g. shop)")
        parser.add_argument("--dir", default=".", help="the folder to write it in, which must exist (default: here)")

    def handle(self, *args, name: str, dir: str, **options):
        folder = Path(dir).expanduser().absolute()
        try:
            written = write_family(name=name, folder=folder, penelope_home=settings.BASE_DIR)
        except ScaffoldNotMade as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"Wrote the family {name} in {folder / name}:")
        for path in written:
            self.stdout.write(f"  {path.relative_to(folder)}")
        python, home, where = shlex.quote(sys.executable), shlex.quote(str(settings.BASE_DIR)), shlex.quote(str(folder))
        tests = shlex.quote(str(folder / name / "tests"))
        self.stdout.write(
            "\nNext:\n"
            f"  test it (from any folder):\n    {python} -m pytest {tests} -q\n"
            f"  serve it (from {home}):\n"
            f"    PENELOPE_PLUGINS=plugins.web,plugins.demo,{name} PYTHONPATH={where} scripts/serve.sh\n"
            f"  then call it: POST /api/v1/main/plugin/{name}/get-items {{\"url\": \"https://...\"}}\n"
            "  the guide: docs/guides/WRITING_PLUGINS.md"
        )
