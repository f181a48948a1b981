"""The credentials in-process (credentials/services.py and selectors.py),
against Django's test database (a real SQLite file) and a store folder of
the test's own for the key files: what a PUT may hold, the seal (bound to its row, opened by its key only), the key
made at first use, `Revealed`, the rotation of the key file (whole, and
stopped after each step) and of CREDENTIALS_KEY, and the admin. No worker,
no browser: tests/test_credentials.py has the API on a real worker."""

from __future__ import annotations

import logging
import stat
from io import StringIO

import pyotp
import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from core import store_lock
from core.errors import CredentialIncomplete, CredentialUnreadable, InvalidCredential, NoSuchCredential
from credentials import rotation, rules, sealing, selectors, services
from credentials.models import Credential

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "pw-Planted-7c1e-hunter2"
TOTP_SECRET = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"  # 160 bits, as pyotp itself takes it
NOTES = "recovery codes: planted-notes-5d2a"
GITHUB = {
    "url": "https://github.com",
    "username": "octo",
    "password": PASSWORD,
    "totp_secret": TOTP_SECRET,
    "notes": NOTES,
}


@pytest.fixture(autouse=True)
def key_folder(settings, tmp_path):
    """A store folder of the test's own for the key files, and no key from the environment."""
    settings.STORE_DIR = tmp_path
    settings.CREDENTIALS_KEY = ""
    settings.CREDENTIALS_NEW_KEY = ""
    return tmp_path


def other_key() -> str:
    return sealing.encode_key(sealing.make_key())


def names() -> list[str]:
    return list(Credential.objects.values_list("name", flat=True))


# --- a PUT, a read, a delete ---------------------------------------------------------------------


def test_a_credential_is_stored_read_listed_replaced_and_deleted():
    shown, created = services.put_credential("github", GITHUB)
    assert created is True
    assert shown == {
        "name": "github",
        "url": "https://github.com",
        "username": "octo",
        "secrets": {"password": True, "totp": True, "notes": True},
        "changed_at": shown["changed_at"],
        "used_at": None,
    }
    assert selectors.credential_shown("github") == shown and selectors.credentials_shown() == [shown]
    assert selectors.credential_for_reader("github") == {"name": "github", "url": "https://github.com"}
    services.reveal_credential("github")
    used_at = selectors.credential_shown("github")["used_at"]
    assert used_at is not None
    # A PUT replaces it whole: what it leaves out is no longer set; its last use stays.
    replaced, created = services.put_credential("github", {"url": "https://github.com", "password": "another"})
    assert created is False
    assert replaced["secrets"] == {"password": True, "totp": False, "notes": False}
    assert replaced["username"] == "" and replaced["used_at"] == used_at
    assert services.reveal_credential("github").password == "another"
    services.put_credential(
        "gitlab", {"url": "https://gitlab.com", "username": "", "password": "", "totp_secret": None}
    )
    assert [item["name"] for item in selectors.credentials_shown()] == ["github", "gitlab"]
    assert selectors.credential_shown("gitlab")["secrets"] == {
        "password": False,
        "totp": False,
        "notes": False,
    }  # empty is none
    assert services.delete_credential("github") is True and services.delete_credential("github") is False
    with pytest.raises(NoSuchCredential, match="No credential named github"):
        selectors.credential_shown("github")
    with pytest.raises(NoSuchCredential):
        services.reveal_credential("github")
    with pytest.raises(NoSuchCredential) as unknown:
        selectors.credential_shown("../etc/passwd")
    assert "passwd" not in unknown.value.message  # a name that is no name is not said back


BAD = [
    ("Has-Capitals", GITHUB, "name"),
    ("x" * 65, GITHUB, "name"),
    ("", GITHUB, "name"),
    ("github", {**GITHUB, "url": f"https://github.com/{PASSWORD}"}, "url"),  # a path
    ("github", {**GITHUB, "url": "ftp://github.com"}, "url"),
    ("github", {**GITHUB, "url": f"https://octo:{PASSWORD}@github.com"}, "url"),  # user-info
    ("github", {**GITHUB, "url": "https://github.com/?q=1"}, "url"),
    ("github", {**GITHUB, "url": "https://github.com#top"}, "url"),
    ("github", {**GITHUB, "url": "https://github.com:99999"}, "url"),
    ("github", {**GITHUB, "url": "https://"}, "url"),
    ("github", {**GITHUB, "url": "github.com"}, "url"),
    ("github", {**GITHUB, "url": "https://git hub.com"}, "url"),
    ("github", {**GITHUB, "url": 7}, "url"),
    ("github", {key: value for key, value in GITHUB.items() if key != "url"}, "url"),
    ("github", {**GITHUB, "url": "https://" + "a" * 300 + ".com"}, "url"),
    ("github", {**GITHUB, "totp_secret": PASSWORD}, "totp_secret"),  # not base32
    ("github", {**GITHUB, "totp_secret": "JBSWY3DP"}, "totp_secret"),  # 40 bits
    ("github", {**GITHUB, "password": 12345678}, "password"),
    ("github", {**GITHUB, "password": ["a"]}, "password"),
    ("github", {**GITHUB, "username": True}, "username"),
    ("github", {**GITHUB, "notes": "x" * 10_001}, "notes"),
    ("github", {**GITHUB, "password": "nul\x00"}, "password"),
    ("github", {**GITHUB, "pasword": PASSWORD}, "pasword"),  # an unknown field
    ("github", {**GITHUB, PASSWORD + " !": 1}, None),  # an unknown field whose name is not said back
]


@pytest.mark.parametrize(("name", "body", "field"), BAD)
def test_every_bad_field_is_refused_naming_it_never_its_value_and_nothing_is_stored(name, body, field):
    services.put_credential("kept", {"url": "https://kept.example"})
    with pytest.raises(InvalidCredential) as refused:
        services.put_credential(name, body)
    message = refused.value.message
    assert PASSWORD not in message and TOTP_SECRET not in message and NOTES not in message
    if field is not None:
        assert field in message
    assert names() == ["kept"]


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        ("https://github.com", "https://github.com"),
        ("HTTPS://GitHub.COM/", "https://github.com"),
        ("https://github.com:443", "https://github.com"),
        ("http://localhost:8080", "http://localhost:8080"),
        ("http://127.0.0.1:80/", "http://127.0.0.1"),
        ("http://[::1]:5000", "http://[::1]:5000"),
        ("https://bücher.example", "https://xn--bcher-kva.example"),
    ],
)
def test_the_url_is_kept_as_a_browser_writes_its_origin(sent, kept):
    assert services.put_credential("site", {"url": sent})[0]["url"] == kept


def test_a_totp_secret_is_taken_as_sites_show_it_and_gives_pyotps_code():
    services.put_credential(
        "spaced", {"url": "https://a.example", "totp_secret": "jbsw y3dp ehpk 3pxp jbsw y3dp ehpk 3pxp"}
    )
    assert services.reveal_credential("spaced").totp() == pyotp.TOTP(TOTP_SECRET).now()
    services.put_credential(
        "short", {"url": "https://a.example", "totp_secret": "JBSWY3DPEHPK3PXP="}
    )  # 80 bits, padded: many sites' size
    assert services.reveal_credential("short").totp() == rules.SiteTotp("JBSWY3DPEHPK3PXP").now()
    services.put_credential("none", {"url": "https://a.example", "password": PASSWORD})
    with pytest.raises(CredentialIncomplete, match="has no TOTP secret"):
        services.reveal_credential("none").totp()


def test_revealed_holds_the_secrets_and_shows_none_of_them():
    services.put_credential("github", GITHUB)
    revealed = services.reveal_credential("github")
    assert (revealed.name, revealed.url, revealed.username) == ("github", "https://github.com", "octo")
    assert revealed.password == PASSWORD and revealed.notes == NOTES
    assert revealed.totp() == pyotp.TOTP(TOTP_SECRET).now()
    for shown in (repr(revealed), str(revealed), f"{revealed}", repr([revealed])):
        assert PASSWORD not in shown and TOTP_SECRET not in shown and NOTES not in shown
        assert "github" in shown
    assert not hasattr(revealed, "__dict__")  # vars() shows nothing either


# --- the seal ----------------------------------------------------------------------------------------


def test_nothing_stored_holds_a_secret_in_plain_text():
    services.put_credential("github", GITHUB)
    row = Credential.objects.values().get(name="github")
    stored = repr(row)
    assert PASSWORD not in stored and TOTP_SECRET not in stored and NOTES not in stored
    assert sealing.sealed_with(row["sealed"]) == sealing.key_id(sealing.read_key_file(sealing.key_file()))


def test_a_seal_moved_to_another_row_does_not_open():
    services.put_credential("github", GITHUB)
    services.put_credential("gitlab", {"url": "https://gitlab.com", "password": "theirs"})
    sealed = Credential.objects.get(name="github").sealed
    Credential.objects.filter(name="gitlab").update(sealed=sealed)
    with pytest.raises(CredentialUnreadable, match="not sealed for this name and url"):
        services.reveal_credential("gitlab")
    # The same name on another origin does not open it either.
    Credential.objects.filter(name="github").update(url="https://evil.example")
    with pytest.raises(CredentialUnreadable):
        services.reveal_credential("github")
    assert Credential.objects.get(name="github").used_at is None  # an unread seal is no use


def test_another_key_does_not_open_a_seal():
    sealed = sealing.seal("github", "https://github.com", {"password": PASSWORD})
    assert sealing.unseal("github", "https://github.com", sealed)["password"] == PASSWORD
    stranger = sealing.Keyring.of(sealing.make_key())
    with pytest.raises(CredentialUnreadable, match="a key this worker does not have"):
        sealing.unseal("github", "https://github.com", sealed, stranger)
    # A ring that claims the seal's key id with another key: GCM's tag refuses it.
    forged = sealing.Keyring(sealing.make_key(), {sealing.sealed_with(sealed): sealing.make_key()}, "forged")
    with pytest.raises(CredentialUnreadable, match="do not open"):
        sealing.unseal("github", "https://github.com", sealed, forged)
    with pytest.raises(CredentialUnreadable, match="damaged"):
        sealing.unseal("github", "https://github.com", sealed[:20])


def test_the_key_file_is_made_at_first_use_owner_only_and_its_path_logged_never_the_key(key_folder, caplog):
    caplog.set_level(logging.INFO, logger="penelope.credentials")
    assert not (key_folder / "credentials_key").exists()
    services.put_credential("a", {"url": "https://a.example", "password": PASSWORD})
    services.put_credential("b", {"url": "https://b.example", "password": PASSWORD})
    key_file = key_folder / "credentials_key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key_text = key_file.read_text().strip()
    assert len(sealing.decode_key(key_text)) == 32
    lines = [record.getMessage() for record in caplog.records]
    assert lines == [f"made a new credentials key at {key_file}"]  # once
    assert key_text not in caplog.text
    assert sorted(path.name for path in key_folder.iterdir()) == ["credentials_key"]  # nothing left aside


def test_with_credentials_key_the_environments_key_seals_and_no_file_is_made(settings, key_folder):
    settings.CREDENTIALS_KEY = other_key()
    services.put_credential("github", GITHUB)
    assert not (key_folder / "credentials_key").exists()
    assert services.reveal_credential("github").password == PASSWORD
    settings.CREDENTIALS_KEY = other_key()
    with pytest.raises(CredentialUnreadable, match=r"\(CREDENTIALS_KEY\)"):
        services.reveal_credential("github")


# --- rotation ----------------------------------------------------------------------------------------


def fill() -> dict[str, dict]:
    services.put_credential("github", GITHUB)
    services.put_credential("gitlab", {"url": "https://gitlab.com", "username": "lab", "password": "lab-" + PASSWORD})
    services.put_credential("bare", {"url": "https://bare.example"})
    return {name: secrets_of(name) for name in ("github", "gitlab", "bare")}


def secrets_of(name: str) -> dict:
    revealed = services.reveal_credential(name)
    return {
        "password": revealed.password,
        "notes": revealed.notes,
        "totp": revealed.totp() if revealed.has_totp else None,
    }


def opens_with(key: bytes) -> set[str]:
    ring = sealing.Keyring.of(key)
    opened = set()
    for credential in Credential.objects.all():
        try:
            sealing.unseal(credential.name, credential.url, credential.sealed, ring)
        except CredentialUnreadable:
            continue
        opened.add(credential.name)
    return opened


def test_rotate_key_reseals_every_credential_with_a_new_key_file(key_folder):
    before = fill()
    old = sealing.read_key_file(sealing.key_file())
    out = StringIO()
    call_command("credentials", "rotate-key", stdout=out)
    new = sealing.read_key_file(sealing.key_file())
    assert new != old
    assert opens_with(old) == set() and opens_with(new) == {"github", "gitlab", "bare"}
    assert {name: secrets_of(name) for name in before} == before
    assert out.getvalue().startswith("Re-sealed 3 credentials with a new key")
    assert sealing.encode_key(new) not in out.getvalue() and sealing.encode_key(old) not in out.getvalue()
    assert sorted(path.name for path in key_folder.iterdir()) == ["credentials_key", "credentials_key.lock"]
    assert stat.S_IMODE(sealing.key_file().stat().st_mode) == 0o600


def test_a_rotation_stopped_after_each_step_leaves_every_credential_readable_and_is_taken_up(key_folder):
    before = fill()
    old = sealing.read_key_file(sealing.key_file())
    # Stopped after step 1: the new key is pending; new seals are made with it, old ones still open.
    pending, resumed = rotation.begin()
    assert resumed is False and stat.S_IMODE(sealing.pending_key_file().stat().st_mode) == 0o600
    assert {name: secrets_of(name) for name in before} == before
    services.put_credential("later", {"url": "https://later.example", "password": "later-" + PASSWORD})
    assert opens_with(pending) == {"later"}
    # Stopped after step 2: every seal is the new key's, the old key file still in place.
    assert rotation.reseal_all(sealing.Keyring.of(pending, old)) == 4
    assert opens_with(pending) == {"github", "gitlab", "bare", "later"} and opens_with(old) == set()
    assert sealing.read_key_file(sealing.key_file()) == old
    assert {name: secrets_of(name) for name in before} == before and secrets_of("later")[
        "password"
    ] == "later-" + PASSWORD
    # The next rotation takes the pending key up and finishes.
    out = StringIO()
    call_command("credentials", "rotate-key", stdout=out)
    assert "taken up again" in out.getvalue() and "Re-sealed 4 credentials" in out.getvalue()
    assert sealing.read_key_file(sealing.key_file()) == pending and not sealing.pending_key_file().exists()
    assert {name: secrets_of(name) for name in before} == before


def test_a_rotation_that_would_lose_a_credential_changes_nothing():
    fill()
    Credential.objects.filter(name="gitlab").update(url="https://moved.example")  # its seal no longer opens
    sealed = dict(Credential.objects.values_list("name", "sealed"))
    with pytest.raises(CommandError, match=r"1 credentials do not open .*\(gitlab\); nothing was re-sealed"):
        call_command("credentials", "rotate-key", stdout=StringIO())
    assert dict(Credential.objects.values_list("name", "sealed")) == sealed
    assert secrets_of("github")["password"] == PASSWORD  # still opens, with either key


def test_a_second_rotation_at_once_is_refused():
    with rotation.rotation_lock(), pytest.raises(rotation.RotationCannotRun, match="Another rotation"):
        rotation.rotate_key_file()


def test_rotate_key_with_credentials_key_reseals_with_credentials_new_key(settings):
    settings.CREDENTIALS_KEY = old = other_key()
    before = fill()
    with pytest.raises(CommandError, match="CREDENTIALS_NEW_KEY"):
        call_command("credentials", "rotate-key", stdout=StringIO())
    settings.CREDENTIALS_NEW_KEY = old
    with pytest.raises(CommandError, match="the same key"):
        call_command("credentials", "rotate-key", stdout=StringIO())
    settings.CREDENTIALS_NEW_KEY = new = other_key()
    out = StringIO()
    call_command("credentials", "rotate-key", stdout=out)
    assert out.getvalue().startswith(
        "Re-sealed 3 credentials with CREDENTIALS_NEW_KEY. Now put that key in CREDENTIALS_KEY"
    )
    assert old not in out.getvalue() and new not in out.getvalue()
    assert opens_with(sealing.decode_key(old)) == set() and len(opens_with(sealing.decode_key(new))) == 3
    settings.CREDENTIALS_KEY, settings.CREDENTIALS_NEW_KEY = new, ""
    assert {name: secrets_of(name) for name in before} == before


def test_rotate_key_with_credentials_key_is_refused_while_a_worker_serves_the_store(settings):
    settings.CREDENTIALS_KEY, settings.CREDENTIALS_NEW_KEY = other_key(), other_key()
    serving = store_lock.acquire()  # as `serve` holds it
    try:
        with pytest.raises(CommandError, match="is serving the store"):
            call_command("credentials", "rotate-key", stdout=StringIO())
    finally:
        store_lock.release(serving)


def test_credentials_new_key_without_credentials_key_is_refused(settings):
    settings.CREDENTIALS_NEW_KEY = other_key()
    with pytest.raises(CommandError, match="Unset CREDENTIALS_NEW_KEY"):
        call_command("credentials", "rotate-key", stdout=StringIO())


# --- the admin -----------------------------------------------------------------------------------------


def test_the_admin_lists_credentials_read_only_and_never_shows_a_seal_or_a_secret(client):
    User.objects.create_superuser("operator", "op@example.com", "pw")
    client.login(username="operator", password="pw")
    services.put_credential("github", GITHUB)
    sealed = Credential.objects.get(name="github").sealed
    listing = client.get("/admin/credentials/credential/")
    detail = client.get("/admin/credentials/credential/github/change/")
    for page in (listing, detail):
        assert page.status_code == 200
        body = page.content.decode()
        assert "https://github.com" in body and "octo" in body and "password, TOTP, notes" in body
        assert sealed not in body and sealed[:40] not in body
        assert PASSWORD not in body and TOTP_SECRET not in body and NOTES not in body
    assert client.post("/admin/credentials/credential/github/delete/").status_code == 403
    assert client.get("/admin/credentials/credential/add/").status_code == 403
