// The active controller of a KRaft cluster: the leader of the metadata quorum, asked through the
// Admin API (describeMetadataQuorum, the call behind kafka-metadata-quorum.sh describe --status).
// Run by `infra/kafka/kafka.sh controller` with the broker jars on the class path (no build step:
// java runs a single source file); prints the leader's node id.
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.QuorumInfo;

public class QuorumLeader {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        try (Admin admin = Admin.create(p)) {
            QuorumInfo q = admin.describeMetadataQuorum().quorumInfo().get();
            System.out.println(q.leaderId());
        }
    }
}
