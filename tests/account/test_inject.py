"""The account plugin's bean goes into a broker's `<plugins>` and nowhere else (harness/account/plugin.py):
one `<plugins>` (a second would replace the first in Spring), an ops team's plugins kept, the
rest of the file byte for byte."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from harness.account.plugin import BEAN, AccountUnavailable, inject

AMQ = "http://activemq.apache.org/schema/core"
HEAD = '<beans xmlns="http://www.springframework.org/schema/beans">'


def _plugins(xml: str) -> list[ET.Element]:
    root = ET.fromstring(xml)
    return root.findall(f".//{{{AMQ}}}plugins")


def test_a_broker_without_plugins_gets_one_with_the_bean_first():
    xml = f'{HEAD}<broker xmlns="{AMQ}" brokerName="b"><transportConnectors/></broker></beans>'
    out = inject(xml)
    (p,) = _plugins(out)
    assert p[0].get("class") == "bfh.BrokerAccount"
    assert out.replace(f"\n    <plugins>{BEAN}</plugins>", "") == xml


def test_existing_plugins_are_kept_and_not_duplicated():
    auth = "<simpleAuthenticationPlugin><users/></simpleAuthenticationPlugin>"
    xml = f'{HEAD}<broker xmlns="{AMQ}"><plugins>{auth}</plugins></broker></beans>'
    out = inject(xml)
    (p,) = _plugins(out)
    assert [c.tag.split("}")[1] for c in p] == ["bean", "simpleAuthenticationPlugin"]
    assert out.replace(BEAN, "") == xml


def test_an_empty_plugins_element_and_a_prefixed_broker():
    xml = f'<beans xmlns:amq="{AMQ}"><amq:broker brokerName="b"><amq:plugins /></amq:broker></beans>'
    (p,) = _plugins(inject(xml))
    assert len(p) == 1
    xml = f'<beans xmlns:amq="{AMQ}"><amq:broker brokerName="b"/></beans>'
    (p,) = _plugins(inject(xml))  # a self-closed broker is opened for its one child
    assert len(p) == 1
    with pytest.raises(AccountUnavailable):
        inject(xml.replace("<amq:broker", "<nothing"))


def test_plugins_set_by_attribute_cannot_take_the_bean():
    xml = f'{HEAD}<broker xmlns="{AMQ}" plugins="#mine"></broker></beans>'
    with pytest.raises(AccountUnavailable, match="by attribute"):
        inject(xml)
