"""Write the position-balanced labeled set: choice decisions of 3 to 6 options whose right answers sit in
every position equally often, so a model's taste for a slot shows as a skew in the positions it picks.

Each family is one routing question with hand-written states, two per option. A case shows the options
rotated so that its right option lands in slot (option index + state index) mod n: in each family every
slot is right exactly twice, every option is right in two slots, and the options keep their cyclic neighbours.

    .venv/bin/python benchmarks/position_balanced.py          # (re)write decisionctl/data/position_balanced.jsonl
    .venv/bin/python benchmarks/position_balanced.py --check  # exit 1 if the committed file differs
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tools" / "decisionctl" / "data" / "position_balanced.jsonl"

# (family id, instructions, {option: description}, {option: [state, state]})
FAMILIES: list[tuple[str, str, dict[str, str], dict[str, list[str]]]] = [
    (
        "team",
        "Which team should handle this ticket?",
        {
            "Billing": "Payments, invoices, refunds, charges",
            "Technical": "Bugs, outages, errors, log-in problems",
            "Sales": "Pricing questions, upgrades, new contracts, demos",
        },
        {
            "Billing": [
                "You charged my card twice for the May invoice. Please reverse one of the payments.",
                "Our invoice shows 40 seats but we only have 25 users. Can you correct the amount?",
            ],
            "Technical": [
                "The mobile app crashes every time I open the settings page since yesterday's update.",
                "I reset my password three times and the login page still says my credentials are invalid.",
            ],
            "Sales": [
                "We are a team of 200 and want a quote for the enterprise plan with single sign-on.",
                "Could someone give us a demo of the analytics add-on before we decide to upgrade?",
            ],
        },
    ),
    (
        "pr-kind",
        "What kind of change is this pull request?",
        {
            "Bug fix": "Corrects behaviour that was wrong",
            "Feature": "Adds a capability users did not have",
            "Documentation": "Changes only docs, comments or examples",
        },
        {
            "Bug fix": [
                "Title: Fix off-by-one in pagination. The last item of each page was skipped; this corrects the index.",
                "Title: Handle empty config file. Startup crashed with a KeyError when config.yaml was empty.",
            ],
            "Feature": [
                "Title: Add CSV export to reports. Users can now download any report as a CSV file.",
                "Title: Support dark mode. Adds a theme switch to the settings page and stores the choice.",
            ],
            "Documentation": [
                "Title: Clarify install steps in README. Rewords the setup section and adds a troubleshooting note.",
                "Title: Fix typos in API reference. No code changes; corrects parameter names in the docs.",
            ],
        },
    ),
    (
        "expense",
        "What should happen with this expense claim?",
        {
            "Approve": "Within policy and fully documented",
            "Ask for receipt": "Allowed, but the receipt is missing or unreadable",
            "Reject": "Not allowed by the expense policy",
        },
        {
            "Approve": [
                "Train ticket to the client site, 84 EUR, receipt attached, trip in the approved travel plan.",
                "Team lunch for 4 during the onsite workshop, 96 EUR, itemised receipt attached.",
            ],
            "Ask for receipt": [
                "Taxi from the airport to the hotel, 52 EUR. Note: receipt lost, will try to find it.",
                "Conference registration, 450 EUR, approved by manager. The attached image is blank.",
            ],
            "Reject": [
                "Personal gym membership for March, 60 EUR, receipt attached.",
                "Minibar and in-room movie at the hotel, 38 EUR; the policy excludes both.",
            ],
        },
    ),
    (
        "hr",
        "Which HR queue does this request belong to?",
        {
            "Payroll": "Salary payments, payslips, tax withholding",
            "Benefits": "Health insurance, pension, perks",
            "Leave": "Vacation, sick days, parental leave",
            "Recruiting": "Open positions, referrals, interviews",
        },
        {
            "Payroll": [
                "My October payslip is missing the overtime I worked on the weekend of the 12th.",
                "The tax withheld from my salary doubled this month and I did not change anything.",
            ],
            "Benefits": [
                "How do I add my newborn daughter to my health insurance plan?",
                "I would like to raise my monthly pension contribution from 3% to 5%.",
            ],
            "Leave": [
                "I need to take two weeks of vacation in August; how do I book them?",
                "I was sick from Monday to Wednesday; where do I register the sick days?",
            ],
            "Recruiting": [
                "A former colleague of mine would be great for the open data engineer role. How do I refer her?",
                "Can we schedule the second interview for the designer candidate next Tuesday?",
            ],
        },
    ),
    (
        "email",
        "What kind of email is this?",
        {
            "Invoice": "A bill or a payment request",
            "Meeting request": "Asks to schedule a call or a meeting",
            "Newsletter": "Bulk marketing or news, not addressed to us personally",
            "Complaint": "A customer unhappy with a product or service",
        },
        {
            "Invoice": [
                "Please find attached invoice #2231 for November consulting, 3,400 USD, due within 30 days.",
                "Reminder: payment of 780 EUR for the annual licence is now overdue. Bank details below.",
            ],
            "Meeting request": [
                "Would you have 30 minutes on Thursday afternoon to go over the migration plan?",
                "Can we set up a call next week with your security team to review the audit findings?",
            ],
            "Newsletter": [
                "This month at Acme: five new integrations, our summer webinar series, and customer stories.",
                "Weekly digest: the top ten articles on cloud cost optimisation. Unsubscribe at any time.",
            ],
            "Complaint": [
                "This is the third time the delivery arrived late and nobody answers the phone. I am very unhappy.",
                "The blender I bought broke after one week and your store refused to replace it.",
            ],
        },
    ),
    (
        "shipment",
        "What is the problem with this shipment?",
        {
            "Delayed": "Still on its way, but late",
            "Damaged": "Arrived broken or harmed",
            "Lost": "Never arrived and tracking has stopped",
            "Wrong address": "Sent or delivered to the wrong place",
        },
        {
            "Delayed": [
                "Tracking says the parcel is in transit, but it was due four days ago.",
                "The order was supposed to arrive Monday; the carrier now says next Friday.",
            ],
            "Damaged": [
                "The box arrived crushed and two of the six glasses inside are shattered.",
                "The laptop was delivered with a cracked screen and a dented corner.",
            ],
            "Lost": [
                "Tracking has not changed in three weeks and the carrier cannot find the parcel.",
                "Marked as delivered, but it is not at my door, with my neighbours or at the post office.",
            ],
            "Wrong address": [
                "I moved last month and the package went to my old apartment.",
                "The label shows house number 14 but I live at number 41, so it went to a stranger.",
            ],
        },
    ),
    (
        "bug-area",
        "Which product area does this bug report concern?",
        {
            "Login": "Signing in, passwords, two-factor codes",
            "Payments": "Checkout, cards, charges",
            "Search": "Finding items, search results, filters",
            "Notifications": "Emails, push messages, alerts",
            "Reports": "Dashboards, charts, exports",
        },
        {
            "Login": [
                "The two-factor code from the authenticator app is always rejected as expired.",
                "After entering my password the sign-in page just reloads with no error.",
            ],
            "Payments": [
                "Checkout fails with 'card declined' for every card, even ones that work elsewhere.",
                "I was charged but the order page still says payment pending.",
            ],
            "Search": [
                "Searching for 'blue jacket' returns kitchen appliances.",
                "The price filter is ignored: results above my maximum still show up.",
            ],
            "Notifications": [
                "I stopped receiving the email alerts when a colleague comments on my task.",
                "Push messages arrive twice on my phone, a minute apart.",
            ],
            "Reports": [
                "The monthly revenue chart on the dashboard shows zero for March.",
                "Exporting the sales report to Excel produces an empty file.",
            ],
        },
    ),
    (
        "agent-step",
        "What does this agent step do?",
        {
            "Read data": "Looks data up without changing it",
            "Write data": "Creates or updates records",
            "Delete data": "Removes records",
            "Send a message": "Contacts a person outside the system",
            "Move money": "Pays, refunds or transfers funds",
        },
        {
            "Read data": [
                "SELECT name, plan FROM customers WHERE id = 4412",
                "GET /api/orders?status=open&limit=50",
            ],
            "Write data": [
                "UPDATE customers SET plan = 'pro' WHERE id = 4412",
                "POST /api/tickets with body {'title': 'Printer jam', 'priority': 'low'}",
            ],
            "Delete data": [
                "DELETE FROM sessions WHERE created_at < '2025-01-01'",
                "DELETE /api/users/8812 (remove the user account)",
            ],
            "Send a message": [
                "send_email(to='client@example.com', subject='Your quote', body='Please find the quote attached.')",
                "sms.send(number='+4915112345678', text='Your appointment is confirmed for 10:00.')",
            ],
            "Move money": [
                "payments.refund(charge_id='ch_9921', amount=49.00, currency='EUR')",
                "bank.transfer(from='operating', to='supplier-233', amount=12500)",
            ],
        },
    ),
    (
        "it-queue",
        "Which IT queue should take this request?",
        {
            "Hardware": "Laptops, monitors, docks, broken devices",
            "Software": "Installing or updating applications",
            "Network": "Wi-Fi, VPN, connectivity",
            "Access": "Permissions, accounts, shared drives",
            "Email": "Mailboxes, calendars, distribution lists",
            "Printing": "Printers, scanners, toner",
        },
        {
            "Hardware": [
                "My laptop battery drains from full to empty in forty minutes.",
                "The external monitor stays black when I plug it into the new dock.",
            ],
            "Software": [
                "Please install the latest version of the statistics package on my workstation.",
                "The design application asks for an update but I do not have admin rights to run it.",
            ],
            "Network": [
                "The VPN disconnects every ten minutes when I work from home.",
                "Wi-Fi on the third floor is so slow that video calls keep freezing.",
            ],
            "Access": [
                "I need read access to the finance shared drive for the quarterly audit.",
                "The new intern has started but has no account yet.",
            ],
            "Email": [
                "Please add me to the sales-team distribution list.",
                "My mailbox is full and I cannot receive new messages.",
            ],
            "Printing": [
                "The printer by the kitchen shows a paper jam error even though the tray is empty.",
                "The scanner on floor two sends scans to the wrong email address.",
            ],
        },
    ),
    (
        "claim",
        "Which type of insurance claim is this?",
        {
            "Car": "Vehicle accidents and damage",
            "Home": "Damage to a house or its contents",
            "Travel": "Cancelled trips, lost luggage, care abroad",
            "Health": "Doctor, hospital and medicine costs",
            "Pet": "Veterinary costs for an animal",
            "Phone": "Damage to or theft of a mobile phone",
        },
        {
            "Car": [
                "Another driver reversed into my parked car and dented the rear door.",
                "A stone cracked my windscreen on the motorway.",
            ],
            "Home": [
                "A burst pipe flooded the kitchen and ruined the floor.",
                "Burglars broke the back door and took the television.",
            ],
            "Travel": [
                "The airline lost my suitcase on the way to Lisbon.",
                "I had to cancel the cruise because my mother was taken to hospital.",
            ],
            "Health": [
                "I had a knee operation last month and the hospital bill came to 3,200 EUR.",
                "My prescription for asthma medication costs 90 EUR a month.",
            ],
            "Pet": [
                "Our dog swallowed a sock and needed surgery at the vet.",
                "The cat needs daily insulin injections for her diabetes.",
            ],
            "Phone": [
                "I dropped my phone on the pavement and the screen shattered.",
                "My phone was stolen from my bag on the train.",
            ],
        },
    ),
]


def cases() -> list[dict[str, Any]]:
    out = []
    for family, instructions, criteria, states in FAMILIES:
        names = list(criteria)
        n = len(names)
        assert set(states) == set(names) and all(len(s) == 2 for s in states.values()), family
        for k, name in enumerate(names):
            for j, state in enumerate(states[name]):
                slot = (k + j) % n
                shift = (k - slot) % n  # rotate so that option k is shown in `slot`
                order = names[shift:] + names[:shift]
                out.append(
                    {
                        "id": f"{family}-{k}{j}-slot{slot}",
                        "state": state,
                        "question": {
                            "type": "choice",
                            "instructions": instructions,
                            "criteria": {o: criteria[o] for o in order},
                        },
                        "expected": name,
                    }
                )
    return out


def render() -> str:
    return "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file differs from this script's")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    text = render()
    if args.check:
        same = args.out.exists() and args.out.read_text(encoding="utf-8") == text
        print(f"{args.out}: {'up to date' if same else 'differs from benchmarks/position_balanced.py'}")
        return 0 if same else 1
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {len(cases())} cases to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
