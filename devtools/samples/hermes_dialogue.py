"""The words of the Hermes conversation homes (`hermes_conversations`): cast, themes, sentences.

Kept apart from the generator so the generator reads as a plan (who says what, in which session,
asked how) and this file as the vocabulary it draws from. Everything here is data and small pure
functions of a seeded ``random.Random``; nothing imports Mnemosyne.

Pools are ordered by popularity: `zipf` draws the first entries far more often than the last, so a
few people, places and words recur across conversations the way they do in a real user's life.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from datetime import date, timedelta

PEOPLE = (
    "Mara",
    "Tobias",
    "Ines",
    "Kofi",
    "Lena",
    "Rafael",
    "Yuki",
    "Oskar",
    "Priya",
    "Gustav",
    "Amara",
    "Felix",
    "Noor",
    "Henrik",
    "Sofia",
    "Matteo",
    "Elif",
    "Bram",
    "Chiara",
    "Dmitri",
    "Esme",
    "Farid",
    "Greta",
    "Hugo",
    "Isolde",
    "Jonas",
    "Keiko",
    "Lucien",
    "Marisol",
    "Nils",
    "Odile",
    "Pavel",
    "Quentin",
    "Rosalind",
    "Soren",
    "Talia",
    "Ulrich",
    "Vera",
    "Wendell",
    "Xenia",
)
RELATIONS = (
    "neighbour",
    "colleague",
    "cousin",
    "friend",
    "brother",
    "sister",
    "coach",
    "boss",
    "aunt",
    "uncle",
    "flatmate",
    "teammate",
)
CITIES = (
    "Lisbon",
    "Utrecht",
    "Porto",
    "Tallinn",
    "Ghent",
    "Bergen",
    "Lyon",
    "Krakow",
    "Malmo",
    "Trieste",
    "Bilbao",
    "Graz",
    "Aarhus",
    "Leipzig",
    "Valencia",
    "Cork",
    "Bologna",
    "Turku",
    "Brno",
    "Nantes",
    "Ljubljana",
    "Galway",
    "Seville",
    "Innsbruck",
)
VENUES = (
    "the Copper Pot café",
    "Riverside Park",
    "the Elm Street climbing gym",
    "the Castle Road library",
    "Marta's bakery",
    "the Old Mill pub",
    "the Harbour Lane market",
    "the Juniper tea room",
    "the community hall on Birch Avenue",
    "the Lantern bookshop",
    "the Northgate swimming pool",
    "the Saltmarsh diner",
)
EMPLOYERS = (
    "Nordbank",
    "Kestrel Labs",
    "Halvorsen Logistics",
    "Bluewater Clinic",
    "Brightline Media",
    "Fennwick Studio",
    "Orchard Systems",
    "Larkspur Foods",
    "Tidewell Energy",
    "Marlow Insurance",
    "Quillon Press",
    "Ashgrove School",
    "Vantor Robotics",
    "Pebblestone Architects",
    "Corvid Analytics",
    "Heron Pharmacy",
)
ROLES = (
    "nurse",
    "data analyst",
    "project manager",
    "graphic designer",
    "teacher",
    "accountant",
    "software engineer",
    "physiotherapist",
    "sales lead",
    "architect",
    "chef",
    "lab technician",
)
PET_NAMES = (
    "Biscuit",
    "Pepper",
    "Juniper",
    "Mochi",
    "Olive",
    "Pixel",
    "Hazel",
    "Tofu",
    "Ziggy",
    "Clover",
    "Waffles",
    "Maple",
    "Pickle",
    "Nacho",
    "Luna",
    "Rocket",
)
SPECIES = ("dog", "cat", "rabbit", "parrot", "tortoise", "hamster")
PET_LOVES = (
    "chasing tennis balls",
    "sleeping on the radiator",
    "carrot tops",
    "the squeaky duck toy",
    "cardboard boxes",
    "sunflower seeds",
    "long walks on the beach",
    "the laundry basket",
)
ALLERGENS = ("peanuts", "shellfish", "cat hair", "pollen", "gluten", "sesame", "penicillin", "kiwi")
DRINKS = (
    "green tea",
    "oat flat whites",
    "sparkling water",
    "rooibos",
    "black coffee",
    "ginger beer",
    "hot chocolate",
    "mint tea",
    "iced coffee",
    "kombucha",
)
FOODS = (
    "olives",
    "coriander",
    "blue cheese",
    "liquorice",
    "mushrooms",
    "anchovies",
    "beetroot",
    "tofu",
    "aubergine",
    "marzipan",
    "oysters",
    "celery",
)
FAVOURITES = {
    "film": ("The Long Harbour", "Paper Moons", "A Winter in Brno", "The Glass Orchard"),
    "band": ("The Velvet Tides", "Northern Lanterns", "Kite Season", "Brass Lung"),
    "dish": ("mushroom risotto", "lamb tagine", "pad see ew", "shakshuka"),
    "board game": ("Carcassonne", "Azul", "Wingspan", "Ticket to Ride"),
    "author": ("Ottessa Vale", "Ingrid Holm", "Tomas Reyes", "Ada Lindqvist"),
    "season": ("autumn", "early spring", "late summer", "winter"),
}
GIFTS = (
    "a hand-thrown mug",
    "a leather notebook",
    "a pair of binoculars",
    "a sourdough starter",
    "a vintage map of the coast",
    "a cast-iron pan",
    "a silk scarf",
    "a bonsai tree",
    "concert tickets",
    "a watercolour set",
)
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
TIMES_OF_DAY = ("morning", "afternoon", "evening", "lunch break", "weekend")
WEATHER = ("grey", "windy", "lovely", "freezing", "humid", "rainy")


@dataclasses.dataclass(frozen=True)
class Theme:
    """One recurring topic of the user's life: its words and the facts it lends itself to.

    `words` are in popularity order (drawn Zipf-like); `items` can be bought (cost facts);
    `events` are (past tense, base form) phrases for temporal facts; `group` is a regular group
    activity (meeting day and place facts); `achievements` are (clause, answer) pairs for the
    identity statements; `recommend` is what a friend recommends (a kind and some brands).
    """

    name: str
    words: tuple[str, ...]
    items: tuple[str, ...]
    events: tuple[tuple[str, str], ...]
    group: str
    achievements: tuple[tuple[str, str], ...]
    recommend: tuple[str, tuple[str, ...]]
    tips: tuple[str, ...]


THEMES = (
    Theme(
        "garden",
        (
            "tomatoes",
            "raised beds",
            "compost",
            "seedlings",
            "basil",
            "mulch",
            "greenhouse",
            "courgettes",
            "soil",
            "trellis",
            "slugs",
            "watering",
            "pruning",
            "beans",
            "roses",
        ),
        ("greenhouse", "rain barrel", "pruning saw", "compost bin", "raised bed kit", "hose reel"),
        (
            ("planted the tomato seedlings", "plant the tomato seedlings"),
            ("built the new raised bed", "build the new raised bed"),
            ("harvested the first courgettes", "harvest the first courgettes"),
            ("moved the compost heap", "move the compost heap"),
            ("pruned the apple tree", "prune the apple tree"),
            ("sowed the runner beans", "sow the runner beans"),
        ),
        "allotment society",
        (
            ("grew the first tomatoes from seed", "tomatoes from seed"),
            ("kept the roses alive through the frost", "roses"),
        ),
        ("fertiliser", ("Biogrow", "Greenleaf", "Rootwise")),
        (
            "water in the morning rather than the evening",
            "add a layer of mulch",
            "check the leaves for slugs after rain",
        ),
    ),
    Theme(
        "cooking",
        (
            "sourdough",
            "starter",
            "oven",
            "recipe",
            "risotto",
            "spices",
            "dough",
            "stock",
            "pasta",
            "flour",
            "skillet",
            "marinade",
            "dumplings",
            "curry",
            "knife",
        ),
        ("stand mixer", "Dutch oven", "chef's knife", "pasta machine", "spice grinder", "wok"),
        (
            ("baked the first sourdough loaf", "bake the first sourdough loaf"),
            ("made dumplings with {person}", "make dumplings with {person}"),
            ("cooked the big curry for the party", "cook the big curry for the party"),
            ("tried the fermented hot sauce", "try the fermented hot sauce"),
            ("hosted the dinner for {person}", "host the dinner for {person}"),
        ),
        "supper club",
        (
            ("baked a loaf that actually rose", "sourdough loaf"),
            ("cooked for twelve people", "cooked for twelve"),
        ),
        ("flour", ("Millstone", "Shipton", "Bakewell")),
        ("let the dough rest longer", "toast the spices first", "salt the water properly"),
    ),
    Theme(
        "running",
        (
            "intervals",
            "shoes",
            "tempo",
            "knee",
            "stretching",
            "long run",
            "recovery",
            "pace",
            "hills",
            "track",
            "hydration",
            "blisters",
            "warm-up",
            "calves",
            "splits",
        ),
        ("running shoes", "GPS watch", "foam roller", "hydration vest", "headlamp", "race entry"),
        (
            ("ran the {city} half marathon", "run the {city} half marathon"),
            ("did the hill repeats with {person}", "do the hill repeats with {person}"),
            ("saw the physio about my knee", "see the physio about my knee"),
            ("ran my first 10k under an hour", "run my first 10k under an hour"),
            ("bought the new trail shoes", "buy the new trail shoes"),
        ),
        "running club",
        (
            ("finished the half marathon", "half marathon"),
            ("ran ten kilometres without stopping", "ten kilometres"),
        ),
        ("running shoe", ("Stridewell", "Norra", "Pacelane")),
        (
            "keep the easy runs really easy",
            "stretch your calves after every run",
            "add one rest day",
        ),
    ),
    Theme(
        "travel",
        (
            "flights",
            "hotel",
            "passport",
            "train",
            "luggage",
            "itinerary",
            "museum",
            "ferry",
            "booking",
            "layover",
            "hostel",
            "coast",
            "tickets",
            "airport",
            "visa",
        ),
        (
            "suitcase",
            "rail pass",
            "travel insurance",
            "noise-cancelling headphones",
            "hotel room",
            "ferry ticket",
        ),
        (
            ("booked the flights to {city}", "book the flights to {city}"),
            ("got back from {city}", "get back from {city}"),
            ("renewed my passport", "renew my passport"),
            ("took the night train to {city}", "take the night train to {city}"),
            ("visited the harbour museum in {city}", "visit the harbour museum in {city}"),
        ),
        "language exchange",
        (
            ("travelled alone for the first time", "travelled alone"),
            ("planned the whole trip myself", "whole trip"),
        ),
        ("travel app", ("Wayfarer", "Railbee", "Tripnest")),
        (
            "book the train early",
            "keep a copy of your passport",
            "pack one day lighter than you think",
        ),
    ),
    Theme(
        "work",
        (
            "deadline",
            "meeting",
            "project",
            "report",
            "manager",
            "team",
            "presentation",
            "inbox",
            "review",
            "client",
            "budget",
            "spreadsheet",
            "office",
            "standup",
            "roadmap",
        ),
        (
            "standing desk",
            "office chair",
            "second monitor",
            "conference ticket",
            "laptop stand",
            "headset",
        ),
        (
            ("gave the big presentation", "give the big presentation"),
            ("had my performance review", "have my performance review"),
            ("met the new client from {city}", "meet the new client from {city}"),
            ("handed in the quarterly report", "hand in the quarterly report"),
            ("went to the team offsite", "go to the team offsite"),
        ),
        "book club at work",
        (
            ("led my first client workshop", "client workshop"),
            ("got the budget approved", "budget approved"),
        ),
        ("note-taking app", ("Inkwell", "Notary", "Ledgerly")),
        (
            "block an hour for deep work",
            "write the summary first",
            "ask for the deadline in writing",
        ),
    ),
    Theme(
        "car",
        (
            "tyres",
            "brakes",
            "battery",
            "mechanic",
            "service",
            "charging",
            "mileage",
            "parking",
            "engine",
            "inspection",
            "oil",
            "clutch",
            "garage",
            "wipers",
            "insurance",
        ),
        ("winter tyres", "roof box", "dash cam", "home charger", "new battery", "car service"),
        (
            ("took the car in for its inspection", "take the car in for its inspection"),
            ("got the winter tyres fitted", "get the winter tyres fitted"),
            ("drove {person} to the airport", "drive {person} to the airport"),
            ("had the brakes replaced", "have the brakes replaced"),
        ),
        "car-share rota",
        (
            ("changed a tyre on my own", "changed a tyre"),
            ("passed the advanced driving course", "driving course"),
        ),
        ("mechanic", ("Castle Motors", "Pit Stop Garage", "Ridgeway Autos")),
        (
            "check the tyre pressure monthly",
            "keep the receipts for the service book",
            "book the inspection early",
        ),
    ),
    Theme(
        "reading",
        (
            "novel",
            "library",
            "chapter",
            "author",
            "poetry",
            "translation",
            "bookshop",
            "biography",
            "audiobook",
            "essay",
            "series",
            "ending",
            "shelf",
            "notes",
            "review",
        ),
        (
            "e-reader",
            "bookshelf",
            "reading lamp",
            "library card",
            "signed first edition",
            "audiobook subscription",
        ),
        (
            ("finished the biography of the explorer", "finish the biography of the explorer"),
            (
                "went to the author reading at the library",
                "go to the author reading at the library",
            ),
            ("started the new fantasy series", "start the new fantasy series"),
            ("returned the overdue library books", "return the overdue library books"),
        ),
        "book club",
        (
            ("read fifty books this year", "fifty books"),
            ("wrote my first book review", "book review"),
        ),
        ("audiobook app", ("Earshot", "Pagebird", "Listenwell")),
        (
            "read the first chapter twice",
            "keep a notebook of quotes",
            "try the audiobook for the slow parts",
        ),
    ),
    Theme(
        "finance",
        (
            "budget",
            "savings",
            "mortgage",
            "taxes",
            "pension",
            "receipts",
            "rent",
            "invoice",
            "fund",
            "expenses",
            "salary",
            "loan",
            "bills",
            "account",
            "interest",
        ),
        (
            "accountant's fee",
            "budgeting app",
            "home insurance",
            "new boiler",
            "tax software",
            "safe deposit box",
        ),
        (
            ("filed the tax return", "file the tax return"),
            ("opened the savings account", "open the savings account"),
            ("met the mortgage adviser", "meet the mortgage adviser"),
            ("paid off the credit card", "pay off the credit card"),
        ),
        "investment club",
        (
            ("paid off the car loan", "car loan"),
            ("saved a full month of salary", "month of salary"),
        ),
        ("budgeting app", ("Pennywise", "Tallybook", "Coinnest")),
        ("automate the savings transfer", "keep receipts in one folder", "check the fees twice"),
    ),
    Theme(
        "music",
        (
            "guitar",
            "chords",
            "piano",
            "practice",
            "choir",
            "concert",
            "rehearsal",
            "scales",
            "metronome",
            "lessons",
            "songs",
            "vinyl",
            "strings",
            "sheet music",
            "amplifier",
        ),
        (
            "acoustic guitar",
            "digital piano",
            "metronome",
            "set of strings",
            "concert tickets",
            "amplifier",
        ),
        (
            ("sang in the choir's spring concert", "sing in the choir's spring concert"),
            (
                "had my first guitar lesson with {person}",
                "have my first guitar lesson with {person}",
            ),
            ("saw The Velvet Tides live", "see The Velvet Tides live"),
            ("recorded the demo with {person}", "record the demo with {person}"),
        ),
        "choir",
        (
            ("played a song in front of people", "played a song"),
            ("learned the whole piece by heart", "whole piece"),
        ),
        ("guitar teacher", ("Strumwell", "Fretworks", "Chordline")),
        ("practise ten minutes every day", "slow it down with the metronome", "record yourself"),
    ),
    Theme(
        "renovation",
        (
            "paint",
            "kitchen",
            "tiles",
            "plumber",
            "floor",
            "walls",
            "bathroom",
            "shelves",
            "drill",
            "wallpaper",
            "electrician",
            "cupboards",
            "insulation",
            "windows",
            "skirting",
        ),
        (
            "new kitchen tap",
            "tile cutter",
            "cordless drill",
            "bathroom fan",
            "paint sprayer",
            "oak shelves",
        ),
        (
            ("painted the spare room", "paint the spare room"),
            ("had the plumber fix the boiler", "have the plumber fix the boiler"),
            ("tiled the bathroom wall", "tile the bathroom wall"),
            ("put up the shelves with {person}", "put up the shelves with {person}"),
        ),
        "repair café",
        (
            ("tiled the bathroom myself", "tiled the bathroom"),
            ("rewired the lamp on my own", "rewired the lamp"),
        ),
        ("paint", ("Farrowdale", "Tintwell", "Brushcraft")),
        ("tape the edges first", "buy ten percent more tiles", "ask for two quotes"),
    ),
)

USER_CLAUSES = (
    "spent most of the {time} on the {word}",
    "things with the {word} are finally looking better",
    "{person} asked me about the {word} again",
    "not sure whether to deal with the {word} now or after the weekend",
    "it was {weather} all {time} so nothing happened with the {word}",
    "I keep forgetting to sort out the {word}",
    "{person} says the {word} used to be easier",
    "we talked about the {word} and the {other} for ages",
    "the {other} took longer than I expected",
    "I read something about the {word} that made me rethink the {other}",
    "had coffee with {person} and mostly talked about the {word}",
    "work was a lot today",
    "the weather was {weather} again",
    "finally had a quiet {time}",
    "I want to get the {word} sorted before {weekday}",
    "{person} sent me a photo of their {word}",
    "I need a different approach to the {word}",
    "the {word} thing is still on my mind",
    "I was up early and did a bit of the {word}",
    "my back hurts after all the {word}",
)
USER_QUESTIONS = (
    "Any tips for the {word}?",
    "What do you think about the {word}?",
    "Is it worth getting a {item}?",
    "How long does the {word} usually take?",
    "Should I ask {person} about the {other}?",
    "Remind me, what did we say about the {word}?",
    "Do you think the {other} can wait?",
)
USER_SHORT = (
    "Thanks, that helps!",
    "Makes sense.",
    "Haha, true.",
    "Okay, I'll try that.",
    "Good point.",
    "Not much, just checking in.",
    "Ok",
    "Will do!",
)
USER_GREETINGS = ("Hi again!", "Hey, it's me.", "Hello hello.", "Back again.")
MORNING_GREETINGS = ("Morning!", "Good morning.")
EVENING_GREETINGS = ("Evening!", "Hi, long day.")
IDENTITY_SLIPS = (
    "I'm feeling like {food} tonight, is that weird?",
    "Feeling like a nap after all that {word}.",
)
"""Chatter the plugin's identity capture mistakes for an identity statement ("feeling like")."""
ASSISTANT_REPLIES = (
    "That sounds like a good {time}. How are things with the {word}?",
    "For the {word}, I'd {tip}.",
    "{person} might have a point about the {word}.",
    "It usually depends on the {other}, but a few weeks is normal.",
    "Happy to help. Do you want me to keep track of the {word}?",
    "Sorry to hear that. I hope tomorrow is calmer.",
    "Good idea. Let me know what happens with the {word}.",
    "Sure! What's the plan for the {other}?",
    "I'd {tip}, and then see what happens with the {word}.",
    "Honestly, the {word} can wait a little; the {other} matters more.",
)
ASSISTANT_SHORT = ("Anytime, glad it helps!", "Talk soon, good luck!", "Happy to help, as always.")
ASSISTANT_GREETINGS = (
    "Welcome back! What's on your mind today?",
    "Hi! How has your week been?",
    "Good to hear from you. What are we working on?",
)
ASSISTANT_ACKNOWLEDGEMENTS = (
    "That's good to know, thanks for telling me.",
    "Nice, I'll keep that in mind.",
    "Interesting! How do you feel about that?",
    "Got it. Anything you want me to do with that?",
    "Oh, lovely. Tell me more when you have time.",
)


def zipf(rng: random.Random, pool: Sequence[str], exponent: float = 1.0) -> str:
    """An entry of `pool` drawn with weight 1 / rank**exponent (the first ones recur most)."""
    weights = [1 / (rank + 1) ** exponent for rank in range(len(pool))]
    return rng.choices(pool, weights=weights)[0]


def capitalised(text: str) -> str:
    """`text` with its first letter upper-cased (the rest left alone: names keep their case)."""
    return text[:1].upper() + text[1:]


def long_date(day: date) -> str:
    """``Friday, 6 March 2026``: how an answer names a day."""
    return f"{WEEKDAYS[day.weekday()]}, {day.day} {MONTHS[day.month - 1]} {day.year}"


@dataclasses.dataclass(frozen=True)
class RelativeDate:
    """A relative date as the user says it ("last Friday"), resolved from the session's date.

    `kind` is ``days`` (offset days from the session, negative in the past; "yesterday",
    "three days ago", "tomorrow"), ``weekday`` (the most recent `weekday` strictly before the
    session when `offset` is negative, the next one strictly after it when positive), ``week``
    (the week `offset` weeks from the session's) or ``weekend`` (the weekend before the session).
    """

    phrase: str
    kind: str
    offset: int
    weekday: int | None = None

    def resolve(self, session_day: date) -> str:
        """The answer: the day (or week) the phrase means, said on `session_day`."""
        if self.kind == "days":
            return long_date(session_day + timedelta(days=self.offset))
        if self.kind == "weekday":
            assert self.weekday is not None
            if self.offset < 0:
                back = (session_day.weekday() - self.weekday) % 7 or 7
                return long_date(session_day - timedelta(days=back))
            ahead = (self.weekday - session_day.weekday()) % 7 or 7
            return long_date(session_day + timedelta(days=ahead))
        if self.kind == "weekend":
            back = (session_day.weekday() - 5) % 7 or 7  # the Saturday before the session
            return f"the weekend of {long_date(session_day - timedelta(days=back))}"
        monday = session_day - timedelta(days=session_day.weekday()) + timedelta(weeks=self.offset)
        return f"the week of {long_date(monday)}"


PAST_RELATIVE = (
    RelativeDate("yesterday", "days", -1),
    RelativeDate("two days ago", "days", -2),
    RelativeDate("three days ago", "days", -3),
    RelativeDate("last week", "week", -1),
    RelativeDate("two weeks ago", "days", -14),
    RelativeDate("last weekend", "weekend", -1),
    RelativeDate("this morning", "days", 0),
) + tuple(
    RelativeDate(f"last {name}", "weekday", -1, number) for number, name in enumerate(WEEKDAYS)
)
FUTURE_RELATIVE = (
    RelativeDate("tomorrow", "days", 1),
    RelativeDate("next week", "week", 1),
    RelativeDate("in two weeks", "days", 14),
) + tuple(
    RelativeDate(f"next {name}", "weekday", 1, number) for number, name in enumerate(WEEKDAYS)
)

ROLE_NOUNS = {
    "garden": "gardener",
    "cooking": "cook",
    "running": "runner",
    "travel": "traveller",
    "work": "professional",
    "car": "mechanic",
    "reading": "reader",
    "finance": "grown-up with money",
    "music": "musician",
    "renovation": "builder",
}
"""What the user feels like after an achievement of the theme ("I feel like a real gardener")."""
DOMAINS = {
    "garden": "in the garden",
    "cooking": "in the kitchen",
    "running": "with my running",
    "travel": "on my travels",
    "work": "at work",
    "car": "with the car",
    "reading": "with my reading",
    "finance": "with money",
    "music": "with music",
    "renovation": "in the house",
}
"""Where a theme's achievements happen (a question about one names that part of the user's life)."""
GENERIC_EVENTS = (
    ("had lunch with {person} at {venue}", "have lunch with {person} at {venue}"),
    ("went to {person}'s birthday party", "go to {person}'s birthday party"),
    ("flew back from {city}", "fly back from {city}"),
    ("helped {person} move house", "help {person} move house"),
    ("had a long video call with {person}", "have a long video call with {person}"),
    ("picked {person} up from the station", "pick {person} up from the station"),
    ("went to the concert with {person}", "go to the concert with {person}"),
    ("met {person} for the first time", "meet {person} for the first time"),
)
"""Events anyone's life has; the person (new to the conversation) makes each one distinct."""
