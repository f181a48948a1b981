"""The `web` family: generic actions for any site.

- `reading`: open, wait, text, content, evaluate, state
- `collect`: items of a list, scrolled and paged
- `files`: screenshots and PDFs
- `transfer`: files into a page (`upload`)
- `persona`: the profile's cookies and site storage
- `sign_in`: a sign-in form filled from one of the persona's credentials
- `base`: the request controls and the wait every reading action shares
- `network`: capturing what a page fetches
"""

from plugins.web import collect, files, persona, reading, sign_in, transfer  # noqa: F401  (each registers its actions)
from plugins.web.base import family

__all__ = ["family"]
