// The broker's account of every message (docs/contracts.md, "The broker's account"): an ActiveMQ
// BrokerPlugin that appends one JSON line per arrival, dispatch, ack, consumer and connection
// change, expiry, discard and DLQ move to ${activemq.base}/account.jsonl (ts: epoch seconds).
//
// Loaded from a jar in ${activemq.base}/lib by one bean in <plugins> (harness/account/inject.py).
// Its hooks run on the broker's transport and dispatch threads: they never block and never throw
// (a throw in dispatch closes the consumer's connection). Each hook builds its record and offers it
// to a bounded queue; one writer thread writes them. A full queue drops the record and the next
// written line says how many were dropped (`account_gap`): a gap, never a silent hole.
//
// Only a master writes: a slave blocks on the store lock before its broker chain, so this plugin,
// starts (BrokerService L621-622, L728-733 at tag activemq-5.17.2).
package bfh;

import java.io.BufferedWriter;
import java.io.FileOutputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.activemq.broker.BrokerPluginSupport;
import org.apache.activemq.broker.ConnectionContext;
import org.apache.activemq.broker.ConsumerBrokerExchange;
import org.apache.activemq.broker.ProducerBrokerExchange;
import org.apache.activemq.broker.region.MessageReference;
import org.apache.activemq.broker.region.Subscription;
import org.apache.activemq.command.ActiveMQTextMessage;
import org.apache.activemq.command.BrokerId;
import org.apache.activemq.command.ConnectionInfo;
import org.apache.activemq.command.ConsumerInfo;
import org.apache.activemq.command.Message;
import org.apache.activemq.command.MessageAck;
import org.apache.activemq.command.MessageDispatch;
import org.apache.activemq.command.RemoveSubscriptionInfo;
import org.apache.activemq.util.ByteSequence;

public class BrokerAccount extends BrokerPluginSupport {
    static final int QUEUE = 1 << 16;
    static final int SCAN = 8192; // bytes of a payload searched for "msg_id"
    static final long FLUSH_MS = 20;
    static final byte[] KEY = "\"msg_id\"".getBytes(StandardCharsets.US_ASCII);

    // lock-free, and the writer polls it: a blocking queue would wake the writer once per record
    private final ConcurrentLinkedQueue<Rec> queue = new ConcurrentLinkedQueue<>();
    private final AtomicInteger queued = new AtomicInteger();
    private final AtomicLong dropped = new AtomicLong();
    private volatile boolean running;
    private Thread writer;
    private String file;

    /** A record: its JSON text, and for dispatches and acks the keys the writer thread needs. */
    static final class Rec {
        final String json;
        final int kind; // 0 plain, 1 dispatch, 2 ack, 3 consumer gone
        final String cid;
        final String mid;
        final String msgId;
        final byte ackType;
        final double ts;

        Rec(String json, int kind, String cid, String mid, String msgId, byte ackType, double ts) {
            this.json = json;
            this.kind = kind;
            this.cid = cid;
            this.mid = mid;
            this.msgId = msgId;
            this.ackType = ackType;
            this.ts = ts;
        }
    }

    public void setFile(String file) {
        this.file = file;
    }

    // -- lifecycle -------------------------------------------------------------------------------
    @Override
    public void start() throws Exception {
        super.start();
        String path = file != null ? file : System.getProperty("activemq.base", ".") + "/account.jsonl";
        Writer out = new BufferedWriter(
                new OutputStreamWriter(new FileOutputStream(path, true), StandardCharsets.UTF_8), 1 << 16);
        running = true;
        BrokerId id = getBrokerId();
        offer(plain("broker_started", now(), "\"broker_name\":" + q(getBrokerName()) + ",\"broker_id\":"
                + q(id == null ? null : id.getValue()) + ",\"pid\":" + ProcessHandle.current().pid()));
        writer = new Thread(() -> writeLoop(out), "bfh-broker-account");
        writer.setDaemon(true);
        writer.start();
    }

    @Override
    public void stop() throws Exception {
        offer(plain("broker_stopping", now(), null));
        running = false;
        Thread w = writer;
        if (w != null) {
            w.join(5000);
        }
        super.stop();
    }

    // -- hooks -----------------------------------------------------------------------------------
    @Override
    public void addConnection(ConnectionContext context, ConnectionInfo info) throws Exception {
        super.addConnection(context, info);
        try {
            String remote = context.getConnection() == null ? null : context.getConnection().getRemoteAddress();
            String connector = context.getConnector() == null ? null : context.getConnector().toString();
            offer(plain("connection_added", now(), "\"conn\":" + q(info.getConnectionId()) + ",\"client_id\":"
                    + q(info.getClientId()) + ",\"remote\":" + q(remote) + ",\"connector\":" + q(connector)
                    + ",\"network\":" + context.isNetworkConnection()));
        } catch (Throwable t) {
            gap(t);
        }
    }

    @Override
    public void removeConnection(ConnectionContext context, ConnectionInfo info, Throwable error) throws Exception {
        try {
            offer(plain("connection_removed", now(), "\"conn\":" + q(info.getConnectionId()) + ",\"client_id\":"
                    + q(info.getClientId()) + ",\"error\":" + q(error == null ? null : error.toString())));
        } catch (Throwable t) {
            gap(t);
        }
        super.removeConnection(context, info, error);
    }

    @Override
    public Subscription addConsumer(ConnectionContext context, ConsumerInfo info) throws Exception {
        try {
            // before super: a durable subscription's replay is dispatched while it is added
            offer(plain("consumer_added", now(), consumerFields(context, info)
                    + ",\"subscription\":" + q(info.getSubscriptionName())
                    + ",\"durable\":" + (info.getSubscriptionName() != null)
                    + ",\"network\":" + info.isNetworkSubscription()
                    + ",\"selector\":" + q(info.getSelector())
                    + ",\"prefetch\":" + info.getPrefetchSize()));
        } catch (Throwable t) {
            gap(t);
        }
        try {
            return super.addConsumer(context, info);
        } catch (Exception e) {
            safe("consumer_refused", consumerFields(context, info) + ",\"error\":" + q(e.toString()));
            throw e;
        }
    }

    @Override
    public void removeConsumer(ConnectionContext context, ConsumerInfo info) throws Exception {
        try {
            String cid = String.valueOf(info.getConsumerId());
            queueOffer(new Rec(line("consumer_removed", now(), consumerFields(context, info)), 3, cid, null, null,
                    (byte) 0, 0));
        } catch (Throwable t) {
            gap(t);
        }
        super.removeConsumer(context, info);
    }

    @Override
    public void removeSubscription(ConnectionContext context, RemoveSubscriptionInfo info) throws Exception {
        super.removeSubscription(context, info);
        safe("subscription_deleted", "\"client_id\":" + q(info.getClientId()) + ",\"subscription\":"
                + q(info.getSubscriptionName()) + ",\"conn\":" + q(info.getConnectionId()));
    }

    @Override
    public void send(ProducerBrokerExchange exchange, Message message) throws Exception {
        // before super: a fast consumer can be dispatched the message before send returns
        if (advisory(message.getDestination())) {
            super.send(exchange, message);
            return;
        }
        String mid = null;
        try {
            ConnectionContext c = exchange.getConnectionContext();
            mid = String.valueOf(message.getMessageId());
            BrokerId[] path = message.getBrokerPath();
            String via = path != null && path.length > 0 ? path[path.length - 1].getValue() : null;
            offer(plain("arrived", now(), "\"mid\":" + q(mid) + ",\"msg_id\":" + q(msgId(message))
                    + ",\"dest\":" + q(dest(message)) + ",\"client_id\":" + q(c == null ? null : c.getClientId())
                    + ",\"conn\":" + q(c == null ? null : c.getConnectionId()) + ",\"via\":" + q(via)
                    + ",\"persistent\":" + message.isPersistent()));
        } catch (Throwable t) {
            gap(t);
        }
        try {
            super.send(exchange, message);
        } catch (Exception e) {
            safe("refused", "\"mid\":" + q(mid) + ",\"error\":" + q(e.toString()));
            throw e;
        }
    }

    @Override
    public void preProcessDispatch(MessageDispatch md) {
        try {
            Message m = md.getMessage();
            if (m != null && !advisory(m.getDestination())) {
                double ts = now();
                String cid = String.valueOf(md.getConsumerId());
                String mid = String.valueOf(m.getMessageId());
                String id = msgId(m);
                queueOffer(new Rec(line("dispatched", ts, "\"mid\":" + q(mid) + ",\"msg_id\":" + q(id)
                        + ",\"cid\":" + q(cid) + ",\"redelivery\":" + md.getRedeliveryCounter()), 1, cid, mid, id,
                        (byte) 0, ts));
            }
        } catch (Throwable t) {
            gap(t);
        }
        super.preProcessDispatch(md);
    }

    @Override
    public void acknowledge(ConsumerBrokerExchange exchange, MessageAck ack) throws Exception {
        super.acknowledge(exchange, ack); // an ack can be received and not applied: record after
        try {
            byte type = ack.getAckType();
            if (type != MessageAck.DELIVERED_ACK_TYPE && type != MessageAck.REDELIVERED_ACK_TYPE
                    && !advisory(ack.getDestination())) {
                String cid = String.valueOf(ack.getConsumerId());
                String last = ack.getLastMessageId() == null ? null : ack.getLastMessageId().toString();
                queueOffer(new Rec(null, 2, cid, last, null, type, now()));
            }
        } catch (Throwable t) {
            gap(t);
        }
    }

    @Override
    public void messageExpired(ConnectionContext context, MessageReference ref, Subscription sub) {
        safe("expired", refFields(ref, sub));
        super.messageExpired(context, ref, sub);
    }

    @Override
    public boolean sendToDeadLetterQueue(ConnectionContext context, MessageReference ref, Subscription sub,
            Throwable cause) {
        boolean moved = super.sendToDeadLetterQueue(context, ref, sub, cause);
        safe("dead_lettered", refFields(ref, sub) + ",\"moved\":" + moved + ",\"cause\":"
                + q(cause == null ? null : cause.toString()));
        return moved;
    }

    @Override
    public void messageDiscarded(ConnectionContext context, Subscription sub, MessageReference ref) {
        safe("discarded", refFields(ref, sub));
        super.messageDiscarded(context, sub, ref);
    }

    // -- the writer thread -----------------------------------------------------------------------
    /** Per consumer, what was dispatched and not yet acked (dispatch order): an ack names the last
     * message it covers, and a standard ack covers every earlier one too (STOMP `client` mode). */
    private final Map<String, LinkedHashMap<String, String>> unacked = new HashMap<>();

    private void writeLoop(Writer out) {
        try {
            long flushed = System.nanoTime();
            boolean dirty = false;
            while (running || !queue.isEmpty()) {
                Rec r;
                boolean any = false;
                while ((r = queue.poll()) != null) {
                    queued.decrementAndGet();
                    write(out, r);
                    any = true;
                }
                dirty |= any;
                if (!any) {
                    Thread.sleep(2);
                }
                // at most every FLUSH_MS: a kill -9 loses what came in since (blame reads a kill
                // just after a message as a gap), a flush per record would cost the broker a write each
                if (dirty && System.nanoTime() - flushed >= FLUSH_MS * 1_000_000L) {
                    out.flush();
                    flushed = System.nanoTime();
                    dirty = false;
                }
            }
            out.flush();
            out.close();
        } catch (Exception e) {
            // the broker goes on; the file ends where it ends
        }
    }

    private void write(Writer out, Rec r) throws java.io.IOException {
        long lost = dropped.getAndSet(0);
        if (lost > 0) {
            out.write(line("account_gap", r.ts == 0 ? now() : r.ts, "\"dropped\":" + lost));
        }
        if (r.kind == 1) {
            unacked.computeIfAbsent(r.cid, k -> new LinkedHashMap<>()).put(r.mid, r.msgId);
        } else if (r.kind == 3) {
            unacked.remove(r.cid);
        } else if (r.kind == 2) {
            LinkedHashMap<String, String> pending = unacked.get(r.cid);
            boolean standard = r.ackType == MessageAck.STANDARD_ACK_TYPE;
            String ts = ts(r.ts);
            if (pending != null && r.mid != null && pending.containsKey(r.mid)) {
                for (Iterator<Map.Entry<String, String>> it = pending.entrySet().iterator(); it.hasNext();) {
                    Map.Entry<String, String> e = it.next();
                    boolean last = e.getKey().equals(r.mid);
                    if (standard || last) {
                        out.write("{\"ts\":" + ts + ",\"event\":\"acked\",\"mid\":" + q(e.getKey()) + ",\"msg_id\":"
                                + q(e.getValue()) + ",\"cid\":" + q(r.cid) + ",\"type\":" + r.ackType + "}\n");
                        it.remove();
                    }
                    if (last) {
                        break;
                    }
                }
            } else {
                out.write("{\"ts\":" + ts + ",\"event\":\"acked\",\"mid\":" + q(r.mid) + ",\"msg_id\":null,\"cid\":"
                        + q(r.cid) + ",\"type\":" + r.ackType + ",\"undispatched\":true}\n");
            }
            return;
        }
        out.write(r.json);
    }

    // -- helpers ---------------------------------------------------------------------------------
    private void offer(String json) {
        queueOffer(new Rec(json, 0, null, null, null, (byte) 0, 0));
    }

    private void queueOffer(Rec r) {
        if (queued.incrementAndGet() > QUEUE) {
            queued.decrementAndGet();
            dropped.incrementAndGet();
            return;
        }
        queue.add(r);
    }

    private void safe(String event, String fields) {
        try {
            offer(plain(event, now(), fields));
        } catch (Throwable t) {
            gap(t);
        }
    }

    private void gap(Throwable t) {
        dropped.incrementAndGet();
    }

    private static String plain(String event, double ts, String fields) {
        return line(event, ts, fields);
    }

    private static String line(String event, double ts, String fields) {
        return "{\"ts\":" + ts(ts) + ",\"event\":\"" + event + "\"" + (fields == null ? "" : "," + fields) + "}\n";
    }

    private static String consumerFields(ConnectionContext c, ConsumerInfo info) {
        return "\"cid\":" + q(info.getConsumerId()) + ",\"client_id\":" + q(c == null ? null : c.getClientId())
                + ",\"conn\":" + q(c == null ? null : c.getConnectionId()) + ",\"dest\":"
                + q(info.getDestination() == null ? null : info.getDestination().getQualifiedName());
    }

    private static String refFields(MessageReference ref, Subscription sub) {
        Message m = null;
        try {
            m = ref.getMessage();
        } catch (Throwable t) {
            // a reference whose message is gone: its id still says which
        }
        String cid = sub == null || sub.getConsumerInfo() == null ? null
                : String.valueOf(sub.getConsumerInfo().getConsumerId());
        return "\"mid\":" + q(ref.getMessageId()) + ",\"msg_id\":" + q(m == null ? null : msgId(m)) + ",\"cid\":"
                + q(cid) + ",\"dest\":" + q(m == null ? null : dest(m));
    }

    /** ActiveMQ's own advisories (the witness observer reads them): not the run's messages. */
    private static boolean advisory(org.apache.activemq.command.ActiveMQDestination d) {
        return d != null && d.getPhysicalName().startsWith("ActiveMQ.Advisory.");
    }

    private static String dest(Message m) {
        return m.getDestination() == null ? null : m.getDestination().getQualifiedName();
    }

    /** The payload's msg_id (a JSON string field), read from the content bytes without touching
     * the broker's copy (ActiveMQTextMessage.getText() would clear shared content). */
    static String msgId(Message m) {
        try {
            ByteSequence c = m.getContent();
            if (c != null && !m.isCompressed()) {
                return scan(c.getData(), c.getOffset(), c.getLength());
            }
            if (c == null && m instanceof ActiveMQTextMessage) {
                String text = ((ActiveMQTextMessage) m.copy()).getText(); // a copy: its own fields
                if (text != null) {
                    byte[] b = text.getBytes(StandardCharsets.UTF_8);
                    return scan(b, 0, b.length);
                }
            }
        } catch (Throwable t) {
            // no msg_id: the record keeps the broker's message id
        }
        return null;
    }

    static String scan(byte[] b, int off, int len) {
        int end = off + Math.min(len, SCAN);
        outer:
        for (int i = off; i <= end - KEY.length; i++) {
            for (int k = 0; k < KEY.length; k++) {
                if (b[i + k] != KEY[k]) {
                    continue outer;
                }
            }
            int j = i + KEY.length;
            while (j < end && (b[j] == ' ' || b[j] == ':' || b[j] == '\t' || b[j] == '\n' || b[j] == '\r')) {
                j++;
            }
            if (j >= end || b[j] != '"') {
                return null;
            }
            int start = ++j;
            while (j < end && b[j] != '"' && b[j] != '\\') {
                j++;
            }
            return j < end && b[j] == '"' ? new String(b, start, j - start, StandardCharsets.UTF_8) : null;
        }
        return null;
    }

    static double now() {
        return System.currentTimeMillis() / 1000.0;
    }

    /** Epoch seconds with milliseconds, without String.format (a hot path). */
    static String ts(double t) {
        long ms = Math.round(t * 1000.0);
        long frac = ms % 1000;
        return (ms / 1000) + (frac < 10 ? ".00" : frac < 100 ? ".0" : ".") + frac;
    }

    static String q(Object o) {
        if (o == null) {
            return "null";
        }
        String s = o.toString();
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
