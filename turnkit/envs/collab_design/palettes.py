"""Colour palettes and topics (text content) of the design generator, with their split membership.

Example:
    >>> sorted(PALETTES["ocean"])[:3]
    ['accent', 'bg', 'mood']
    >>> set(ID_PALETTES) & set(OOD_PALETTES)
    set()
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

Palette = dict[str, str]

PALETTES: dict[str, Palette] = {
    # in-distribution palettes
    "ocean": dict(bg="#f0f6fb", surface="#ffffff", nav="#0b3c5d", on_nav="#ffffff", accent="#1d7fc1",
                  on_accent="#ffffff", text="#12263a", muted="#4a6378", mood="calm, cool blue tones"),
    "forest": dict(bg="#f3f7f0", surface="#ffffff", nav="#1f3d2b", on_nav="#f3f7f0", accent="#3f8f4f",
                   on_accent="#ffffff", text="#1c2a1f", muted="#55695a", mood="natural greens"),
    "sunset": dict(bg="#fff5ec", surface="#ffffff", nav="#7a2e12", on_nav="#fff5ec", accent="#f26b1d",
                   on_accent="#ffffff", text="#3a1d10", muted="#7d5a48", mood="warm orange colours"),
    "slate": dict(bg="#1e232b", surface="#2b323c", nav="#11151a", on_nav="#e8edf2", accent="#5aa9e6",
                  on_accent="#0d1117", text="#e8edf2", muted="#a9b4c0", mood="a dark theme"),
    "candy": dict(bg="#fff0f6", surface="#ffffff", nav="#6b2150", on_nav="#ffffff", accent="#e0529c",
                  on_accent="#ffffff", text="#3b1530", muted="#7a4a66", mood="playful pinks"),
    "mono": dict(bg="#ffffff", surface="#f0f0f0", nav="#222222", on_nav="#ffffff", accent="#555555",
                 on_accent="#ffffff", text="#111111", muted="#666666", mood="plain black and white"),
    # out-of-distribution palettes
    "neon": dict(bg="#0d0221", surface="#1b0b3a", nav="#000000", on_nav="#39ff14", accent="#39ff14",
                 on_accent="#0d0221", text="#f5f5ff", muted="#b8b0d8", mood="a dark, flashy look"),
    "earth": dict(bg="#efe6d8", surface="#f8f3ea", nav="#5b4636", on_nav="#efe6d8", accent="#b5651d",
                  on_accent="#ffffff", text="#3b2f25", muted="#7a6a5a", mood="earthy browns"),
    "ice": dict(bg="#eef9ff", surface="#ffffff", nav="#bfe3f5", on_nav="#0f3b52", accent="#00a6a6",
                on_accent="#ffffff", text="#0f3b52", muted="#4f7a8c", mood="light, icy colours"),
}  # fmt: skip
"""Palette name -> CSS colours by role, plus a vague ``mood`` phrase for the public prompt."""

ID_PALETTES: tuple[str, ...] = ("ocean", "forest", "sunset", "slate", "candy", "mono")
OOD_PALETTES: tuple[str, ...] = ("neon", "earth", "ice")

TOPICS: MappingProxyType[str, dict[str, Any]] = MappingProxyType({
    "coffee": dict(what="a coffee shop", brands=["Bean There", "Daily Grind", "Copper Cup"],
                   headlines=["Fresh Coffee Daily", "Your Morning Starts Here", "Roasted in Town"],
                   taglines=["Small batch beans, brewed with care.", "Espresso, pastries and a quiet corner."],
                   items=["Espresso", "Cold Brew", "Pastries", "Beans to Go", "Latte Art", "Free Wifi"],
                   button=["See the Menu", "Order Ahead"], links=["Home", "Menu", "Visit", "Contact"]),
    "bikes": dict(what="a bicycle repair shop", brands=["Spoke & Chain", "Gear Up", "Pedal Works"],
                  headlines=["Bikes Fixed Fast", "Ride Again Tomorrow", "Tune-ups Done Right"],
                  taglines=["Same-day repairs for every kind of bike.", "Friendly mechanics, fair prices."],
                  items=["Tune-ups", "Flat Repair", "Brakes", "Wheel Truing", "Rentals", "Parts"],
                  button=["Book a Repair", "Get a Quote"], links=["Home", "Repairs", "Prices", "Contact"]),
    "yoga": dict(what="a yoga studio", brands=["Still Point", "Lotus Room", "Breathe Studio"],
                 headlines=["Find Your Balance", "Stretch, Breathe, Rest", "Yoga for Everyone"],
                 taglines=["Classes for beginners and experts alike.", "Slow down with a class near you."],
                 items=["Morning Flow", "Yin Yoga", "Meditation", "Pilates", "Private Lessons", "Workshops"],
                 button=["Book a Class", "Try It Free"], links=["Home", "Classes", "Teachers", "Contact"]),
    "books": dict(what="a bookstore", brands=["Page Turner", "Ink & Paper", "The Reading Nook"],
                  headlines=["Stories Worth Keeping", "Find Your Next Book", "Read Something New"],
                  taglines=["New and used books, hand-picked.", "A cosy shop for curious readers."],
                  items=["New Arrivals", "Used Books", "Kids Corner", "Book Club", "Gift Cards", "Events"],
                  button=["Browse Books", "Join the Club"], links=["Home", "Books", "Events", "Contact"]),
    "bakery": dict(what="a bakery", brands=["Rise & Shine", "Golden Crust", "Flour Power"],
                   headlines=["Baked This Morning", "Bread Made by Hand", "Sweet and Fresh"],
                   taglines=["Sourdough, cakes and cookies every day.", "Real butter, no shortcuts."],
                   items=["Sourdough", "Croissants", "Cakes", "Cookies", "Custom Orders", "Catering"],
                   button=["Order Now", "See Today's Bakes"], links=["Home", "Bakes", "Order", "Contact"]),
    "plants": dict(what="a plant nursery", brands=["Green Thumb", "Leaf & Root", "Sprout House"],
                   headlines=["Bring Nature Home", "Plants That Thrive", "Grow Something Green"],
                   taglines=["Healthy plants and friendly advice.", "From tiny succulents to tall palms."],
                   items=["Houseplants", "Succulents", "Pots", "Seeds", "Plant Care", "Delivery"],
                   button=["Shop Plants", "Get Advice"], links=["Home", "Shop", "Care", "Contact"]),
    # out-of-distribution topics
    "space": dict(what="a space tourism company", brands=["Orbit Trips", "Star Hopper", "Zero G Tours"],
                  headlines=["Holidays in Orbit", "See Earth From Above", "Your Seat to the Stars"],
                  taglines=["Weekend flights to low orbit.", "Training included, no experience needed."],
                  items=["Orbit Flights", "Moon Flyby", "Training", "Space Suits", "Safety", "Gift Seats"],
                  button=["Reserve a Seat", "Watch Launches"], links=["Home", "Trips", "Safety", "Contact"]),
    "drones": dict(what="a drone racing league", brands=["Rotor League", "Fast Props", "Sky Sprint"],
                   headlines=["Race the Sky", "Speed on Four Rotors", "Join the Next Race"],
                   taglines=["Weekly races for pilots of every level.", "Build, fly and compete with us."],
                   items=["Race Days", "Pilot School", "Parts Shop", "Rankings", "Live Stream", "Teams"],
                   button=["Sign Up to Race", "See Rankings"], links=["Home", "Races", "Pilots", "Contact"]),
    "tea": dict(what="a tea house", brands=["Steep & Sip", "Jade Leaf", "Quiet Kettle"],
                headlines=["The Art of Tea", "Slow Tea, Good Company", "Brewed the Old Way"],
                taglines=["Rare teas served with care.", "Ceremonies, tastings and quiet rooms."],
                items=["Green Tea", "Oolong", "Ceremonies", "Tastings", "Teaware", "Gift Boxes"],
                button=["Book a Tasting", "Shop Teas"], links=["Home", "Teas", "Visit", "Contact"]),
})  # fmt: skip
"""Topic name -> text content pools (brands, headlines, taglines, items, button labels, nav links)."""

ID_TOPICS: tuple[str, ...] = ("coffee", "bikes", "yoga", "books", "bakery", "plants")
OOD_TOPICS: tuple[str, ...] = ("space", "drones", "tea")

DESCRIPTIONS: tuple[str, ...] = (
    "Open every day.",
    "Loved by locals.",
    "Simple, fair prices.",
    "Book online in a minute.",
    "Friendly and fast.",
    "Made with care.",
    "Great for groups.",
    "New every week.",
)
"""Short item descriptions shared by every topic."""
